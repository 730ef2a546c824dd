package cluster

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the series of clusters and their endpoints. The request
// path counts NoHealthy; the rest are counted here.
type Metrics struct {
	OutlierEjections  *prometheus.CounterVec
	OutlierSkipped    *prometheus.CounterVec
	HealthChecks      *prometheus.CounterVec
	HealthTransitions *prometheus.CounterVec
	EndpointHealthy   *prometheus.GaugeVec
	NoHealthy         *prometheus.CounterVec
	BudgetExhausted   *prometheus.CounterVec
}

// NewMetrics makes the cluster series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		OutlierEjections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_outlier_ejections_total", Help: "Endpoints ejected by passive outlier detection, by cluster.",
		}, []string{"cluster"}),
		OutlierSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_outlier_ejections_skipped_total", Help: "Ejections not done because max_ejection_percent of the cluster was already out.",
		}, []string{"cluster"}),
		HealthChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_health_checks_total", Help: "Active health checks, by cluster and result (pass, fail).",
		}, []string{"cluster", "result"}),
		HealthTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_health_transitions_total", Help: "Endpoints changing health by active check, by cluster and new state.",
		}, []string{"cluster", "to"}),
		EndpointHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rampart_endpoint_healthy", Help: "1 when the endpoint passes its active health check, 0 when not (clusters with health checks only).",
		}, []string{"cluster", "endpoint"}),
		NoHealthy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_upstream_panic_total", Help: "Requests that found no healthy endpoint, by cluster and panic action (fail_closed: 503; all_endpoints: sent anyway).",
		}, []string{"cluster", "action"}),
		BudgetExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_retry_budget_exhausted_total", Help: "Retries not made because the cluster's retry budget was spent.",
		}, []string{"cluster"}),
	}
	reg.MustRegister(m.OutlierEjections, m.OutlierSkipped, m.HealthChecks, m.HealthTransitions,
		m.EndpointHealthy, m.NoHealthy, m.BudgetExhausted)
	return m
}
