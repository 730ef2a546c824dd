package stage

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A stage's own series is registered once; a later snapshot build asking
// again gets the collector registered first, and a clash panics.
func TestMetricsRegisterReturnsTheFirstCollector(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	opts := prometheus.CounterOpts{Name: "rampart_test_stage_total", Help: "A stage's own counter."}
	first := prometheus.NewCounterVec(opts, []string{"route"})
	if got := m.Register(first); got != first {
		t.Fatal("first registration did not return the collector")
	}
	second := prometheus.NewCounterVec(opts, []string{"route"})
	if got := m.Register(second); got != first {
		t.Fatal("second registration did not return the first collector")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a clashing collector did not panic")
		}
	}()
	m.Register(prometheus.NewCounterVec(opts, []string{"other"}))
}
