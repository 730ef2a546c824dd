// Package accesslog writes the proxy's access log: one JSON line per
// request, handed from the request path to a writer goroutine through a
// bounded queue (a full queue drops the line and counts it in
// rampart_access_log_dropped_total; the request never waits).
//
// The active snapshot's telemetry.access_log policy decides what is
// written: successes are sampled at success_sample_rate, errors and
// security events (shed, deny, authentication failures, 401/403/429) are
// held to errors_per_second by a token bucket that survives snapshot
// swaps while the rate is unchanged; what is not written is counted in
// rampart_access_log_suppressed_total{reason="sampled"|"error_budget"}.
// The configured request headers are copied on the request path (the
// HTTP/1.1 server reuses the header map); redact_headers and
// redact_query_params replace values with "[redacted]".
package accesslog
