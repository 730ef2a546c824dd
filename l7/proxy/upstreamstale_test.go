package proxy

import (
	"testing"

	"github.com/rampart-edge/rampart/l7/upstream"
)

// The pools' stale-connection counts appear on /metrics, one series per
// reason, with the values upstream reports.
func TestUpstreamStaleMetric(t *testing.T) {
	p := New(Options{})
	want := upstream.TotalStale()
	fams, err := p.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "rampart_upstream_stale_connections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if len(got) != len(upstream.StaleReasons) {
		t.Fatalf("series %v, want one per reason %v", got, upstream.StaleReasons)
	}
	for _, r := range upstream.StaleReasons {
		if v, ok := got[r.String()]; !ok || v < float64(want[r]) {
			t.Errorf("reason %s = %v (present %v), want at least %d", r, v, ok, want[r])
		}
	}
}
