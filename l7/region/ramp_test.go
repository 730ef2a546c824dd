package region

import (
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// stateAt is healthyState created at the clock's time, its lag signals a
// second old, with the listed regions down.
func stateAt(now time.Time, downRegions ...string) *regionstate.State {
	s := healthyState()
	s.Created = now
	for i := range s.Platforms {
		for j := range s.Platforms[i].Replicas {
			s.Platforms[i].Replicas[j].ObservedAt = now.Add(-time.Second)
		}
	}
	for _, r := range downRegions {
		region(s, r).Healthy = false
	}
	return s
}

// spread counts the targets of n decisions with rolls 0..n-1.
func spread(v *View, rule *Rule, tenant string, now time.Time, n int) map[string]int {
	out := map[string]int{}
	for roll := range n {
		in := Input{Tenant: tenant, Local: -1, Now: now.UnixNano(), Roll: uint32(roll)}
		var d Decision
		v.Decide(rule, &in, &d)
		out[v.Policy().Name(d.Target)]++
	}
	return out
}

// advance moves the clock to the given time, publishing a fresh region
// state every 10 s on the way (as a producer does), and returns the last view.
func advance(tr *Tracker, p *Policy, clock *fakeClock, to time.Time) *View {
	for clock.t.Add(10 * time.Second).Before(to) {
		clock.t = clock.t.Add(10 * time.Second)
		tr.View(p, stateAt(clock.t))
	}
	clock.t = to
	return tr.View(p, stateAt(clock.t))
}

// A region that comes back gets the recovery steps' shares (10, 50, 100
// percent, one step per minute), across region-state swaps and a snapshot
// swap; the first state a tracker sees starts every region at 100.
func TestRecoverySteps(t *testing.T) {
	p, _ := loadPolicy(t, nil)
	clock := &fakeClock{t: t0}
	tr := NewTracker(clock.now)
	get := p.Rule("get-account")

	var d0 Decision
	v := tr.View(p, nil)
	v.Decide(get, &Input{Tenant: "globex", Now: clock.t.UnixNano()}, &d0)
	if d0.Reason != StateUnknown || !v.StateVersion().IsZero() {
		t.Fatalf("no state: %s with state version %v, want state_unknown and none", d0.Reason, v.StateVersion())
	}
	v = tr.View(p, stateAt(clock.t))
	if got := spread(v, get, "globex", clock.t, 100); got["eu-west"] != 100 {
		t.Fatalf("first state: primary_backup spread %v, want all on the primary eu-west", got)
	}

	clock.t = t0.Add(time.Second)
	v = tr.View(p, stateAt(clock.t, "eu-west"))
	if got := spread(v, get, "globex", clock.t, 100); got["eu-central"] != 100 {
		t.Fatalf("primary down: spread %v, want all on the backup eu-central", got)
	}

	back := t0.Add(2 * time.Second)
	steps := []struct {
		at       time.Duration // after the region came back
		primary  int           // of 100 globex reads
		weighted int           // eu-west's share of 400 initech reads: weight 1 of 1+1+2, times its share
	}{
		{0, 10, 10},
		{59 * time.Second, 10, 10},
		{60 * time.Second, 50, 50},
		{119 * time.Second, 50, 50},
		{120 * time.Second, 100, 100},
		{10 * time.Minute, 100, 100},
	}
	clock.t = back
	for _, st := range steps {
		v = advance(tr, p, clock, back.Add(st.at))
		if got := v.Share(p.Index("eu-west"), clock.t); got != st.primary {
			t.Errorf("+%v: eu-west share %d, want %d", st.at, got, st.primary)
		}
		g := spread(v, get, "globex", clock.t, 100)
		if g["eu-west"] != st.primary || g["eu-west"]+g["eu-central"] != 100 {
			t.Errorf("+%v: primary_backup spread %v, want %d on eu-west, the rest on eu-central", st.at, g, st.primary)
		}
		total := 300 + st.weighted
		w := spread(v, get, "initech", clock.t, total)
		if w["eu-west"] != st.weighted || w["eu-central"] != 100 || w["us-east"] != 200 {
			t.Errorf("+%v: weighted spread over %d rolls %v, want eu-west %d, eu-central 100, us-east 200", st.at, total, w, st.weighted)
		}
		if st.primary == 100 {
			var d Decision
			v.Decide(get, &Input{Tenant: "globex", Now: clock.t.UnixNano(), Roll: 99}, &d)
			if d.Candidates.Len() != 1 {
				t.Errorf("+%v: fully back, the backup is still a candidate: %s", st.at, p.Names(d.Candidates, "|"))
			}
		}
	}

	// A new snapshot does not restart or end a ramp: take eu-west down and
	// back again, then swap the policy halfway.
	clock.t = clock.t.Add(time.Second)
	tr.View(p, stateAt(clock.t, "eu-west"))
	clock.t = clock.t.Add(time.Second)
	back = clock.t
	tr.View(p, stateAt(clock.t))
	p2, _ := loadPolicy(t, func(c *snapshot.Config) { c.Version.Sequence = 21 })
	advance(tr, p, clock, back.Add(50*time.Second))
	v = advance(tr, p2, clock, back.Add(70*time.Second))
	if got := v.Share(p2.Index("eu-west"), clock.t); got != 50 {
		t.Errorf("after a snapshot swap at +70s: eu-west share %d, want 50", got)
	}
	if got := v.Share(p2.Index("eu-central"), clock.t); got != 100 {
		t.Errorf("eu-central never left, share %d, want 100", got)
	}

	// A state that expires makes every signal unknown; the next fresh one
	// brings every region back through the steps.
	clock.t = clock.t.Add(31 * time.Second)
	var d Decision
	v.Decide(p2.Rule("get-account"), &Input{Tenant: "acme", Now: clock.t.UnixNano()}, &d)
	if d.Reason != StateUnknown {
		t.Errorf("expired state: %s, want state_unknown", d.Reason)
	}
	v = tr.View(p2, stateAt(clock.t))
	for _, r := range p2.Regions() {
		if got := v.Share(p2.Index(r), clock.t); got != 10 {
			t.Errorf("after an expired state: %s share %d, want 10", r, got)
		}
	}
}

// A region serving too old a snapshot is out of service; once it catches
// up it ramps back.
func TestConfigCatchUpRamps(t *testing.T) {
	p, _ := loadPolicy(t, nil)
	clock := &fakeClock{t: t0}
	tr := NewTracker(clock.now)
	tr.View(p, stateAt(clock.t))
	clock.t = clock.t.Add(time.Second)
	s := stateAt(clock.t)
	region(s, "eu-central").ConfigVersion.Sequence = 10
	v := tr.View(p, s)
	var d Decision
	v.Decide(p.Rule("get-account"), &Input{Tenant: "umbrella", Hint: "eu-central", Local: -1, Now: clock.t.UnixNano()}, &d)
	if d.Reason != HintIgnored || p.Name(d.Target) != "eu-west" {
		t.Errorf("eu-central stale: %s to %q, want hint_ignored to eu-west", d.Reason, p.Name(d.Target))
	}
	clock.t = clock.t.Add(time.Second)
	v = tr.View(p, stateAt(clock.t))
	if got := v.Share(p.Index("eu-central"), clock.t); got != 10 {
		t.Errorf("eu-central caught up: share %d, want 10", got)
	}
}
