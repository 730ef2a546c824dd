package plane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// leaseProvider stands for the quota lease provider: it adds one lease per
// listed region at the rate it is set to.
type leaseProvider struct {
	mu   sync.Mutex
	rate uint64
}

func (l *leaseProvider) Contribute(now time.Time, s *regionstate.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range s.Regions {
		s.QuotaLeases = append(s.QuotaLeases, regionstate.QuotaLease{Policy: "api-global", Region: r.Name, PerSecond: l.rate, Burst: l.rate / 10, Expires: now.Add(10 * time.Second)})
	}
}

func (l *leaseProvider) set(rate uint64) { l.mu.Lock(); l.rate = rate; l.mu.Unlock() }

// The composer publishes a signed document with the regions nodes report,
// their sites and what a registered provider adds; a change makes a
// higher version at once, with the control epoch.
func TestRegionStateComposer(t *testing.T) {
	p := newPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	leases := &leaseProvider{rate: 1000}
	p.AddRegionStateProvider(leases)
	for _, n := range []model.Status{
		{Identity: model.Identity{NodeID: "fra-1", Region: "eu-west"}, Ready: true, Announcing: []string{"203.0.113.7/24", "192.0.2.0/24"}},
		{Identity: model.Identity{NodeID: "iad-1", Region: "us-east"}, Ready: false, AgentSeen: true},
		{Identity: model.Identity{NodeID: "no-agent", Region: "us-east"}, Ready: true},
	} {
		if err := p.Report(ctx, n); err != nil {
			t.Fatalf("report %s: %v", n.NodeID, err)
		}
	}
	current := func() (*regionstate.State, []byte) { return p.RegionState() }
	var s *regionstate.State
	var file []byte
	eventually(t, "a document with two regions and two sites", func() bool {
		s, file = current()
		return s != nil && len(s.Regions) == 2 && len(s.Sites) == 2
	})
	got, err := regionstate.Parse(file, p.PublicKey())
	if err != nil {
		t.Fatalf("the served document does not verify: %v", err)
	}
	if got.Version.Epoch != p.Leader().Epoch {
		t.Fatalf("document epoch %d, control epoch %d", got.Version.Epoch, p.Leader().Epoch)
	}
	eu, _ := got.Region("eu-west")
	us, _ := got.Region("us-east")
	if !eu.Healthy || us.Healthy {
		t.Fatalf("regions: %+v", got.Regions)
	}
	if fra, _ := got.Site("fra-1"); fra.Region != "eu-west" || len(fra.Announcing) != 2 || fra.Announcing[0] != "192.0.2.0/24" || fra.Announcing[1] != "203.0.113.0/24" {
		t.Fatalf("site fra-1: %+v", fra)
	}
	if _, ok := got.Site("no-agent"); ok {
		t.Fatal("a node whose agent never reported is listed as a site")
	}
	if l, ok := got.QuotaLease("api-global", "us-east"); !ok || l.PerSecond != 1000 {
		t.Fatalf("the provider's lease: %+v, %v", l, ok)
	}

	// A provider's change: a higher version at once.
	before := got.Version
	leases.set(2000)
	p.RegionStateChanged()
	eventually(t, "the new lease rate", func() bool {
		s, _ = current()
		l, _ := s.QuotaLease("api-global", "eu-west")
		return l.PerSecond == 2000
	})
	if !before.Less(s.Version) {
		t.Fatalf("version %s after %s", s.Version, before)
	}

	// A long-poll with the current version waits; with an older one it
	// gets the document at once.
	q := model.WatchQuery{Identity: model.Identity{NodeID: "fra-1"}, Timeout: 50 * time.Millisecond}
	if v, f, err := p.WatchRegionState(ctx, envelope.Version{}, q); err != nil || f == nil || !before.Less(v) {
		t.Fatalf("watch from 0.0: %s, %d bytes, %v", v, len(f), err)
	}
	q.Timeout = 30 * time.Second
	done := make(chan envelope.Version, 1)
	go func() {
		v, _, _ := p.WatchRegionState(ctx, s.Version, q)
		done <- v
	}()
	leases.set(3000)
	p.RegionStateChanged()
	select {
	case v := <-done:
		if !s.Version.Less(v) {
			t.Fatalf("the waiting poll got %s, not above %s", v, s.Version)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a waiting poll was not answered after a change")
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
