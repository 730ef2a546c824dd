package plane

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/rollout"
	"github.com/rampart-edge/rampart/control/store/boltstore"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// A composition that changes nothing but report times makes no new
// version before the refresh; the refresh does, and so does a change.
// Versions only grow, by at least one, even when the clock does not move.
func TestComposeVersions(t *testing.T) {
	st, err := boltstore.Open(t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	_, key, _ := ed25519.GenerateKey(nil)
	p, err := New(Options{Store: st, Key: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RegionStateRefresh: time.Second,
		Policy: rollout.Policy{Stages: rollout.DefaultStages(), ActiveTimeout: time.Minute, Bake: time.Minute, NodeTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for !st.Leader().Leader && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	report := func(ready bool) {
		if err := p.Report(ctx, model.Status{Identity: model.Identity{NodeID: "n1", Region: "eu"}, Ready: ready, AgentSeen: true}); err != nil {
			t.Fatal(err)
		}
	}
	report(true)
	long := model.Identity{NodeID: strings.Repeat("n", 100), Region: "eu"} // a valid node id, too long for a site name
	if err := p.Report(ctx, model.Status{Identity: long, Ready: true, AgentSeen: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	version := func() string { s, _ := p.RegionState(); return s.Version.String() }
	compose := func(at time.Time) {
		t.Helper()
		if err := p.composeRegionState(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	compose(now)
	v1 := version()
	if s, _ := p.RegionState(); len(s.Sites) != 1 || s.Sites[0].Name != "n1" {
		t.Fatalf("sites: %+v", s.Sites)
	}
	report(true) // a new report time only
	compose(now.Add(100 * time.Millisecond))
	if v := version(); v != v1 {
		t.Fatalf("a report that changed nothing made version %s after %s", v, v1)
	}
	compose(now.Add(time.Second)) // the refresh
	v2 := version()
	if v2 == v1 {
		t.Fatal("the refresh made no new version")
	}
	report(false) // a change, composed at the same instant
	compose(now.Add(time.Second))
	s, _ := p.RegionState()
	if r, _ := s.Region("eu"); r.Healthy || s.Version.String() == v2 {
		t.Fatalf("after the node went unready: %s %+v", s.Version, s.Regions)
	}
	prev, _ := p.RegionState()
	report(true)
	compose(now) // the clock went back: the sequence still grows
	cur, _ := p.RegionState()
	if !prev.Version.Less(cur.Version) {
		t.Fatalf("version %s after %s", cur.Version, prev.Version)
	}
	// A provider that names an unlisted region makes Build refuse; the
	// last good document stays.
	p.AddRegionStateProvider(RegionStateFunc(func(now time.Time, s *regionstate.State) {
		s.QuotaLeases = append(s.QuotaLeases, regionstate.QuotaLease{Policy: "p", Region: "mars", Expires: now})
	}))
	if err := p.composeRegionState(ctx, now.Add(5*time.Second)); err == nil {
		t.Fatal("a lease of an unlisted region was published")
	}
	if after, _ := p.RegionState(); after.Version != cur.Version {
		t.Fatalf("the refused composition replaced the document: %s", after.Version)
	}
}
