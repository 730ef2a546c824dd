package stage

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the series the stages count, registered once per proxy.
type Metrics struct {
	AuthFailures *prometheus.CounterVec // rampart_auth_failures_total{policy, reason}
	Denied       *prometheus.CounterVec // rampart_denied_total{match}
	reg          prometheus.Registerer
	cache        cacheState // the response cache's store, made by the first cached route
}

// NewMetrics makes the stages' series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_auth_failures_total", Help: "Requests refused by authentication or scope checks, by auth policy and reason.",
		}, []string{"policy", "reason"}),
		Denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_denied_total", Help: "Requests refused by the fast deny channel, by what matched (cidr, identity).",
		}, []string{"match"}),
		reg: reg,
	}
	reg.MustRegister(m.AuthFailures, m.Denied)
	return m
}

// Register registers a stage's own process-wide collector on the proxy's
// registry the first time and returns the registered one every time, so a
// builder can ask for its series on every snapshot build. It panics when
// c clashes with a different collector (a programming error).
func (m *Metrics) Register(c prometheus.Collector) prometheus.Collector {
	err := m.reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		return are.ExistingCollector
	}
	panic(err)
}
