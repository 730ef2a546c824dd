// Package cluster is the proxy's upstream side below the request path:
// a snapshot's clusters compiled for one runtime (Cluster, Endpoint), and
// the Set of what outlives runtimes, keyed by cluster name and endpoint
// address so a snapshot swap that keeps an endpoint keeps its state.
//
//   - Balancing: Pick is smooth weighted round-robin over the eligible
//     endpoints (healthy, not ejected, allowed by the request's region
//     Filter), preferring the proxy's own region while it has any; panic
//     mode fail_closed (nil) or all_endpoints when none is eligible.
//   - Active health checks: one goroutine per endpoint of a cluster with
//     health_check, started, retuned and stopped by Set.Retain.
//   - Outlier ejection: Report feeds each exchange's outcome; runs of 5xx
//     or gateway errors eject for base_ejection_ms × ejections, capped by
//     max_ejection_ms and max_ejection_percent.
//   - Admission: Admit/Done are the circuit breaker's max_requests,
//     AdmitRetry the retry budget; the pools' limiter holds
//     max_connections and max_pending.
//   - Pools: one upstream.Pool per (cluster, endpoint, settings), one h2c
//     transport per cluster.
//
// Metrics: rampart_outlier_ejections_total, rampart_outlier_ejections_skipped_total,
// rampart_health_checks_total, rampart_health_transitions_total,
// rampart_endpoint_healthy, rampart_upstream_panic_total,
// rampart_retry_budget_exhausted_total.
package cluster
