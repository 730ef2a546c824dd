package region

import (
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// The current binding follows every Set; an older one catches up on its
// next View; a ramp started by a Set carries into a new binding.
func TestLiveBindings(t *testing.T) {
	clock := &fakeClock{t: t0}
	l := NewLive(clock.now)
	p1, _ := loadPolicy(t, nil)
	b1 := l.Bind(p1)
	var d Decision
	b1.View().Decide(p1.Rule("get-account"), &Input{Tenant: "acme", Now: clock.t.UnixNano()}, &d)
	if d.Reason != StateUnknown {
		t.Fatalf("before any state: %s, want state_unknown", d.Reason)
	}
	l.Set(stateAt(clock.t))
	clock.t = clock.t.Add(time.Second)
	l.Set(stateAt(clock.t, "eu-west"))
	clock.t = clock.t.Add(time.Second)
	back := clock.t
	l.Set(stateAt(clock.t))

	p2, _ := loadPolicy(t, func(c *snapshot.Config) { c.Version.Sequence = 21 })
	clock.t = back.Add(20 * time.Second)
	l.Set(stateAt(clock.t))
	clock.t = back.Add(40 * time.Second)
	l.Set(stateAt(clock.t))
	clock.t = back.Add(50 * time.Second)
	b2 := l.Bind(p2) // a snapshot swap halfway through the ramp
	clock.t = back.Add(60 * time.Second)
	l.Set(stateAt(clock.t))
	if got := b2.View().Share(p2.Index("eu-west"), clock.t); got != 50 {
		t.Errorf("new binding at +60s: eu-west share %d, want 50 (the ramp began at the Set that brought it back)", got)
	}
	if b1.View().StateVersion() != b2.View().StateVersion() || b1.View() == nil {
		t.Error("the old binding did not catch up with the state in force")
	}
	b1.View().Decide(p1.Rule("get-account"), &Input{Tenant: "acme", Now: clock.t.UnixNano()}, &d)
	if d.Reason != OKPrimary {
		t.Errorf("old binding after catching up: %s, want ok_primary", d.Reason)
	}
	clock.t = clock.t.Add(31 * time.Second) // no document for longer than region_state_max_age_ms
	b2.View().Decide(p2.Rule("get-account"), &Input{Tenant: "acme", Now: clock.t.UnixNano()}, &d)
	if d.Reason != StateUnknown {
		t.Errorf("stale state: %s, want state_unknown", d.Reason)
	}
}

func TestLiveConcurrent(t *testing.T) {
	l := NewLive(func() time.Time { return t0 })
	p, _ := loadPolicy(t, nil)
	b := l.Bind(p)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 200 {
			l.Set(stateAt(t0))
		}
	}()
	go func() {
		defer wg.Done()
		var d Decision
		for range 2000 {
			b.View().Decide(p.Rule("get-account"), &Input{Tenant: "globex", Now: t0.UnixNano()}, &d)
			if d.Reason != OKPrimary && d.Reason != StateUnknown {
				t.Errorf("decision %s", d.Reason)
				return
			}
		}
	}()
	wg.Wait()
}

// The stricter of the policy's bound (30 s) and the Live's applies.
func TestLiveMaxAge(t *testing.T) {
	clock := &fakeClock{t: t0}
	l := NewLive(clock.now)
	l.SetMaxAge(5 * time.Second)
	p, _ := loadPolicy(t, nil)
	b := l.Bind(p)
	l.Set(stateAt(t0))
	var d Decision
	for _, c := range []struct {
		at   time.Duration
		want Reason
	}{{5 * time.Second, OKPrimary}, {5*time.Second + 1, StateUnknown}, {-5 * time.Second, OKPrimary}, {-5*time.Second - 1, StateUnknown}} {
		b.View().Decide(p.Rule("update-account"), &Input{Tenant: "acme", Now: t0.Add(c.at).UnixNano()}, &d)
		if d.Reason != c.want {
			t.Errorf("state aged %v under a 5 s bound: %s, want %s", c.at, d.Reason, c.want)
		}
	}
	l.SetMaxAge(time.Hour) // looser than the policy's: the policy's 30 s stays
	b2 := l.Bind(p)
	b2.View().Decide(p.Rule("update-account"), &Input{Tenant: "acme", Now: t0.Add(31 * time.Second).UnixNano()}, &d)
	if d.Reason != StateUnknown {
		t.Errorf("state aged 31 s under bounds 30 s and 1 h: %s, want state_unknown", d.Reason)
	}
}
