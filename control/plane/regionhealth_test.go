package plane

import (
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestJudgeRegions(t *testing.T) {
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	node := func(id, region string, ready bool, age time.Duration, seq uint64, clusters ...model.ClusterHealth) model.Node {
		return model.Node{Status: model.Status{Identity: model.Identity{NodeID: id, Region: region}, Ready: ready,
			Active: snapshot.Version{Epoch: 1, Sequence: seq}, Clusters: clusters}, SeenAt: now.Add(-age)}
	}
	db := func(healthy int) model.ClusterHealth {
		return model.ClusterHealth{Name: "db", Healthy: healthy, Total: 2}
	}
	rule := RegionRule{MinReadyPercent: 60, CriticalClusters: []string{"db"}, ReportMaxAge: 10 * time.Second}
	nodes := []model.Node{
		// eu: 3 of 3 ready, db healthy on all: healthy, lowest version 1.4.
		node("eu1", "eu", true, time.Second, 5, db(2)), node("eu2", "eu", true, time.Second, 4, db(1)), node("eu3", "eu", true, 0, 5, db(2)),
		// us: 1 of 2 fresh ready (50% < 60%); the stale ready node does not count.
		node("us1", "us", true, time.Second, 5, db(2)), node("us2", "us", false, time.Second, 5, db(2)), node("us3", "us", true, time.Minute, 5, db(2)),
		// ap: all ready, db healthy on 1 of 3 (33%), one reports no db at all.
		node("ap1", "ap", true, 0, 5, db(1)), node("ap2", "ap", true, 0, 5, db(0)), node("ap3", "ap", true, 0, 5),
		// sa: only stale reports.
		node("sa1", "sa", true, time.Hour, 5, db(2)),
		// no region: not judged.
		node("x1", "", true, 0, 5),
	}
	got := judgeRegions(rule, nodes, now)
	want := []struct {
		name         string
		healthy      bool
		fresh, ready int
		version      uint64
		why          string
	}{
		{"ap", false, 3, 3, 5, "cluster db healthy on 1 of 3 fresh nodes (33% < 60%)"},
		{"eu", true, 3, 3, 4, "3 of 3 fresh nodes ready (100% >= 60%)"},
		{"sa", false, 0, 0, 0, "no fresh report (0 of 1 nodes"},
		{"us", false, 2, 1, 5, "1 of 2 fresh nodes ready (50% < 60%)"},
	}
	if len(got) != len(want) {
		t.Fatalf("judgeRegions = %+v, want %d regions", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Healthy != w.healthy || g.Fresh != w.fresh || g.Ready != w.ready || g.ConfigVersion.Sequence != w.version || !strings.Contains(g.Why, w.why) {
			t.Errorf("region %d = %+v, want %+v", i, g, w)
		}
	}
	// Exactly at the threshold is healthy: 3 of 5 is 60%.
	five := []model.Node{node("a", "r", true, 0, 1), node("b", "r", true, 0, 1), node("c", "r", true, 0, 1), node("d", "r", false, 0, 1), node("e", "r", false, 0, 1)}
	if h := judgeRegions(RegionRule{MinReadyPercent: 60, ReportMaxAge: time.Second}, five, now); !h[0].Healthy {
		t.Fatalf("3 of 5 ready at 60%%: %+v", h[0])
	}
	if h := judgeRegions(RegionRule{MinReadyPercent: 61, ReportMaxAge: time.Second}, five, now); h[0].Healthy {
		t.Fatalf("3 of 5 ready at 61%%: %+v", h[0])
	}
}

func TestRegionRuleDefaults(t *testing.T) {
	r := RegionRule{}
	if err := r.defaults(); err != nil || r.MinReadyPercent != 60 || r.ReportMaxAge != 10*time.Second {
		t.Fatalf("defaults = %+v, %v", r, err)
	}
	for _, bad := range []RegionRule{{MinReadyPercent: 101}, {MinReadyPercent: -1}, {ReportMaxAge: -time.Second}} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
