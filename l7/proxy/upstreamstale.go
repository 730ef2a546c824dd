package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// registerUpstreamStale exports the idle upstream connections the pools
// closed instead of reusing (stray bytes, FIN or RST while idle). The
// counts are process-wide and outlive the pools a snapshot swap closes.
func (m *Metrics) registerUpstreamStale() {
	for _, r := range upstream.StaleReasons {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "rampart_upstream_stale_connections_total",
			Help:        "Idle upstream connections closed instead of reused, by reason: unsolicited (bytes arrived while idle), eof (closed by the server), reset.",
			ConstLabels: prometheus.Labels{"reason": r.String()},
		}, func() float64 { return float64(upstream.TotalStale()[r]) }))
	}
}
