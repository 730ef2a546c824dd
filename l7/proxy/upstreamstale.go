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
	for _, c := range []struct {
		name, help string
		get        func(upstream.Totals) uint64
	}{
		{"rampart_upstream_connections_opened_total", "Upstream connections dialled (process-wide).", func(t upstream.Totals) uint64 { return t.Dials }},
		{"rampart_upstream_connections_reused_total", "Requests sent on an idle upstream connection instead of a new one (process-wide).", func(t upstream.Totals) uint64 { return t.Reuses }},
		{"rampart_upstream_connections_expired_total", "Idle upstream connections closed for age (idle_timeout or the route's max idle age) instead of reused (process-wide).", func(t upstream.Totals) uint64 { return t.Expired }},
		{"rampart_upstream_connections_not_kept_total", "Healthy upstream connections closed on release because the idle list was full (max_idle_per_endpoint), the cluster was at max_connections, or the pool closed (process-wide).", func(t upstream.Totals) uint64 { return t.NotKept }},
	} {
		get := c.get
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(get(upstream.TotalCounts())) }))
	}
}
