package cluster

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

type regions map[string]bool

func (r regions) Allows(region string) bool { return r[region] }

func testCluster(t *testing.T, panicMode string) *Cluster {
	t.Helper()
	s := NewSet(NewMetrics(prometheus.NewRegistry()), slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	t.Cleanup(s.Close)
	cfg := []snapshot.Cluster{{Name: "app", PanicMode: panicMode,
		Endpoints: []snapshot.Endpoint{
			{Address: "192.0.2.1:80", Weight: 1, Region: "eu"},
			{Address: "192.0.2.2:80", Weight: 1, Region: "us"},
			{Address: "192.0.2.3:80", Weight: 2, Region: "us"},
		}}}
	return s.Build(cfg, nil)["app"]
}

// A filter narrows the pick to its regions, and the weights still hold
// among what is left.
func TestPickFilterNarrowsByRegion(t *testing.T) {
	c := testCluster(t, "fail_closed")
	counts := map[string]int{}
	for i := 0; i < 30; i++ {
		ep, panicked := c.Pick(nil, regions{"us": true})
		if ep == nil || panicked {
			t.Fatalf("pick %d: %v, panicked %v", i, ep, panicked)
		}
		counts[ep.Addr]++
	}
	if counts["192.0.2.1:80"] != 0 || counts["192.0.2.2:80"] != 10 || counts["192.0.2.3:80"] != 20 {
		t.Fatalf("picks %v, want none in eu and 1:2 in us", counts)
	}
	if ep, _ := c.Pick(nil, nil); ep == nil {
		t.Fatal("no pick without a filter")
	}
}

// With nothing allowed, fail_closed answers nil and all_endpoints spreads
// over the endpoints the filter allows, never outside them.
func TestPickFilterPanicModes(t *testing.T) {
	c := testCluster(t, "fail_closed")
	if ep, panicked := c.Pick(nil, regions{"ap": true}); ep != nil || !panicked {
		t.Fatalf("fail_closed with no allowed endpoint: %v, panicked %v", ep, panicked)
	}
	c = testCluster(t, "all_endpoints")
	for _, es := range []*Endpoint{c.endpoints[0], c.endpoints[1], c.endpoints[2]} {
		es.state.unhealthy.Store(true)
	}
	for i := 0; i < 4; i++ {
		ep, panicked := c.Pick(nil, regions{"eu": true})
		if ep == nil || ep.Addr != "192.0.2.1:80" || !panicked {
			t.Fatalf("all_endpoints, all unhealthy, eu only: %v, panicked %v", ep, panicked)
		}
	}
	if ep, panicked := c.Pick(nil, regions{"ap": true}); ep != nil || !panicked {
		t.Fatalf("all_endpoints with no allowed endpoint: %v, panicked %v", ep, panicked)
	}
}
