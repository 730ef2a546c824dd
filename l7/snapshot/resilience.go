package snapshot

import (
	"fmt"
	"net/url"
	"strings"
)

// Limits are the proxy-wide bounds.
type Limits struct {
	// MaxConcurrentRequests bounds requests in flight in the whole proxy;
	// beyond it requests get an immediate 503. Default 10000.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests" json:"max_concurrent_requests"`
	// MaxRetryBodyBytes is how much of a request body is kept so the
	// request can be retried; a longer body is streamed and never retried.
	// Default 64 KiB.
	MaxRetryBodyBytes int `yaml:"max_retry_body_bytes" json:"max_retry_body_bytes"`
	// DrainTimeoutMs is how long in-flight requests get on shutdown.
	// Default 30000.
	DrainTimeoutMs int `yaml:"drain_timeout_ms" json:"drain_timeout_ms"`
	// CacheMaxBytes bounds the response cache's memory (all routes).
	// 0 takes the default 256 MiB; 1 MiB..64 GiB.
	CacheMaxBytes int `yaml:"cache_max_bytes" json:"cache_max_bytes,omitempty"`
}

// HealthCheck is an active HTTP check of every endpoint of a cluster.
type HealthCheck struct {
	Path               string `yaml:"path" json:"path"`
	Host               string `yaml:"host" json:"host,omitempty"` // Host header; default the endpoint address
	IntervalMs         int    `yaml:"interval_ms" json:"interval_ms"`
	TimeoutMs          int    `yaml:"timeout_ms" json:"timeout_ms"`
	JitterMs           int    `yaml:"jitter_ms" json:"jitter_ms"`
	HealthyThreshold   int    `yaml:"healthy_threshold" json:"healthy_threshold"`
	UnhealthyThreshold int    `yaml:"unhealthy_threshold" json:"unhealthy_threshold"`
	// ExpectedStatuses are the statuses that count as healthy; default 200..299.
	ExpectedStatuses []int `yaml:"expected_statuses" json:"expected_statuses,omitempty"`
}

// Outlier configures passive ejection of endpoints that fail requests.
type Outlier struct {
	// Consecutive5xx ejects an endpoint after this many 5xx answers in a
	// row; ConsecutiveGatewayErrors after this many 502/503/504 or
	// connection failures in a row. 0 takes the default (5 and 3); -1 off.
	Consecutive5xx           int `yaml:"consecutive_5xx" json:"consecutive_5xx"`
	ConsecutiveGatewayErrors int `yaml:"consecutive_gateway_errors" json:"consecutive_gateway_errors"`
	// An ejection lasts BaseEjectionMs times the number of times the
	// endpoint was ejected (growing with repeats), at most MaxEjectionMs.
	BaseEjectionMs int `yaml:"base_ejection_ms" json:"base_ejection_ms"`
	MaxEjectionMs  int `yaml:"max_ejection_ms" json:"max_ejection_ms"`
	// MaxEjectionPercent bounds the share of the cluster ejected at once
	// (at least one endpoint may always be ejected). Default 10.
	MaxEjectionPercent int `yaml:"max_ejection_percent" json:"max_ejection_percent"`
}

// Breaker is a cluster's circuit breaker: requests beyond it get a fast 503
// with Retry-After.
type Breaker struct {
	MaxRequests    int `yaml:"max_requests" json:"max_requests"`       // in flight to the cluster, default 1024
	MaxPending     int `yaml:"max_pending" json:"max_pending"`         // waiting for a connection, default 128
	MaxConnections int `yaml:"max_connections" json:"max_connections"` // open to the cluster, default 1024
}

// RetryBudget caps retries to a cluster: at any time, retries in flight
// may be at most BudgetPercent of requests in flight, but at least
// MinRetryConcurrency. When the block is absent both take their defaults;
// when present, zero means zero.
type RetryBudget struct {
	BudgetPercent       int `yaml:"budget_percent" json:"budget_percent"`
	MinRetryConcurrency int `yaml:"min_retry_concurrency" json:"min_retry_concurrency"`
}

// Telemetry configures access logs and tracing.
type Telemetry struct {
	AccessLog AccessLog `yaml:"access_log" json:"access_log"`
	Tracing   Tracing   `yaml:"tracing" json:"tracing"`
}

// AccessLog says which requests are logged and what is hidden.
type AccessLog struct {
	// SuccessSampleRate is the share of successful requests (status < 400)
	// logged, 0..1. Default 1.
	SuccessSampleRate *float64 `yaml:"success_sample_rate" json:"success_sample_rate,omitempty"`
	// ErrorsPerSecond bounds the lines per second for errors and security
	// events (4xx, 5xx, sheds, denies), which are otherwise always logged.
	// Default 1000.
	ErrorsPerSecond int `yaml:"errors_per_second" json:"errors_per_second"`
	// Headers are request headers to include in each line.
	Headers []string `yaml:"headers" json:"headers,omitempty"`
	// RedactHeaders and RedactQueryParams have their values replaced by
	// "[redacted]" in the log (names compared case-insensitively for
	// headers, exactly for query parameters).
	RedactHeaders     []string `yaml:"redact_headers" json:"redact_headers,omitempty"`
	RedactQueryParams []string `yaml:"redact_query_params" json:"redact_query_params,omitempty"`
}

// Tracing configures the gateway span of each request.
type Tracing struct {
	// OTLPEndpoint is an OTLP/HTTP collector URL (http://host:4318); empty
	// keeps traces local (traceparent is still passed on).
	OTLPEndpoint string `yaml:"otlp_endpoint" json:"otlp_endpoint,omitempty"`
	// SampleRatio of new traces exported, 0..1; an incoming sampled
	// traceparent is honoured. Default 0.01.
	SampleRatio *float64 `yaml:"sample_ratio" json:"sample_ratio,omitempty"`
	ServiceName string   `yaml:"service_name" json:"service_name"`
}

// Defaults of the resilience settings.
const (
	DefaultMaxConcurrentRequests = 10_000
	DefaultMaxRetryBodyBytes     = 64 << 10
	DefaultDrainTimeoutMs        = 30_000
	DefaultHealthIntervalMs      = 5_000
	DefaultHealthTimeoutMs       = 1_000
	DefaultHealthyThreshold      = 2
	DefaultUnhealthyThreshold    = 3
	DefaultConsecutive5xx        = 5
	DefaultConsecutiveGateway    = 3
	DefaultBaseEjectionMs        = 30_000
	DefaultMaxEjectionMs         = 300_000
	DefaultMaxEjectionPercent    = 10
	DefaultBreakerMaxRequests    = 1024
	DefaultBreakerMaxPending     = 128
	DefaultBreakerMaxConnections = 1024
	DefaultRetryBudgetPercent    = 20
	DefaultMinRetryConcurrency   = 3
	DefaultErrorsPerSecond       = 1000
	DefaultTraceSampleRatio      = 0.01
)

func normalizeResilience(c *Config) {
	setDefault(&c.Limits.MaxConcurrentRequests, DefaultMaxConcurrentRequests)
	setDefault(&c.Limits.MaxRetryBodyBytes, DefaultMaxRetryBodyBytes)
	setDefault(&c.Limits.DrainTimeoutMs, DefaultDrainTimeoutMs)
	normalizeCache(c)
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		if cl.Protocol == "" {
			cl.Protocol = "http1"
		}
		if cl.PanicMode == "" {
			cl.PanicMode = "fail_closed"
		}
		if hc := cl.HealthCheck; hc != nil {
			setDefault(&hc.IntervalMs, DefaultHealthIntervalMs)
			setDefault(&hc.TimeoutMs, DefaultHealthTimeoutMs)
			setDefault(&hc.HealthyThreshold, DefaultHealthyThreshold)
			setDefault(&hc.UnhealthyThreshold, DefaultUnhealthyThreshold)
		}
		o := &cl.Outlier
		setDefault(&o.Consecutive5xx, DefaultConsecutive5xx)
		setDefault(&o.ConsecutiveGatewayErrors, DefaultConsecutiveGateway)
		setDefault(&o.BaseEjectionMs, DefaultBaseEjectionMs)
		setDefault(&o.MaxEjectionMs, DefaultMaxEjectionMs)
		setDefault(&o.MaxEjectionPercent, DefaultMaxEjectionPercent)
		b := &cl.CircuitBreaker
		setDefault(&b.MaxRequests, DefaultBreakerMaxRequests)
		setDefault(&b.MaxPending, DefaultBreakerMaxPending)
		setDefault(&b.MaxConnections, DefaultBreakerMaxConnections)
		if cl.RetryBudget == nil {
			cl.RetryBudget = &RetryBudget{BudgetPercent: DefaultRetryBudgetPercent, MinRetryConcurrency: DefaultMinRetryConcurrency}
		}
	}
	al := &c.Telemetry.AccessLog
	if al.SuccessSampleRate == nil {
		one := 1.0
		al.SuccessSampleRate = &one
	}
	setDefault(&al.ErrorsPerSecond, DefaultErrorsPerSecond)
	tr := &c.Telemetry.Tracing
	if tr.SampleRatio == nil {
		r := DefaultTraceSampleRatio
		tr.SampleRatio = &r
	}
	if tr.ServiceName == "" {
		tr.ServiceName = "rampart"
	}
}

func validateResilience(c *Config, p *problems) {
	l := c.Limits
	checkRange(p, "limits", "max_concurrent_requests", l.MaxConcurrentRequests, 1, 10_000_000)
	checkRange(p, "limits", "max_retry_body_bytes", l.MaxRetryBodyBytes, 0, 16<<20)
	checkRange(p, "limits", "drain_timeout_ms", l.DrainTimeoutMs, 0, 3_600_000)
	for _, cl := range c.Clusters {
		where := fmt.Sprintf("cluster %q", cl.Name)
		switch cl.Protocol {
		case "http1", "h2c":
		default:
			p.add("%s: protocol %q must be http1 or h2c", where, cl.Protocol)
		}
		switch cl.PanicMode {
		case "fail_closed", "all_endpoints":
		default:
			p.add("%s: panic_mode %q must be fail_closed or all_endpoints", where, cl.PanicMode)
		}
		if hc := cl.HealthCheck; hc != nil {
			if !strings.HasPrefix(hc.Path, "/") {
				p.add("%s: health_check.path %q must start with /", where, hc.Path)
			}
			checkRange(p, where, "health_check.interval_ms", hc.IntervalMs, 100, 3_600_000)
			checkRange(p, where, "health_check.timeout_ms", hc.TimeoutMs, 10, 60_000)
			if hc.TimeoutMs > hc.IntervalMs {
				p.add("%s: health_check.timeout_ms %d is longer than interval_ms %d", where, hc.TimeoutMs, hc.IntervalMs)
			}
			checkRange(p, where, "health_check.jitter_ms", hc.JitterMs, 0, hc.IntervalMs)
			checkRange(p, where, "health_check.healthy_threshold", hc.HealthyThreshold, 1, 100)
			checkRange(p, where, "health_check.unhealthy_threshold", hc.UnhealthyThreshold, 1, 100)
			for _, st := range hc.ExpectedStatuses {
				checkRange(p, where, "health_check.expected_statuses entry", st, 100, 599)
			}
		}
		o := cl.Outlier
		checkRange(p, where, "outlier_detection.consecutive_5xx", o.Consecutive5xx, -1, 1000)
		checkRange(p, where, "outlier_detection.consecutive_gateway_errors", o.ConsecutiveGatewayErrors, -1, 1000)
		checkRange(p, where, "outlier_detection.base_ejection_ms", o.BaseEjectionMs, 10, 3_600_000)
		checkRange(p, where, "outlier_detection.max_ejection_ms", o.MaxEjectionMs, o.BaseEjectionMs, 3_600_000)
		checkRange(p, where, "outlier_detection.max_ejection_percent", o.MaxEjectionPercent, 0, 100)
		b := cl.CircuitBreaker
		checkRange(p, where, "circuit_breaker.max_requests", b.MaxRequests, 1, 10_000_000)
		checkRange(p, where, "circuit_breaker.max_pending", b.MaxPending, 0, 10_000_000)
		checkRange(p, where, "circuit_breaker.max_connections", b.MaxConnections, 1, 10_000_000)
		checkRange(p, where, "retry_budget.budget_percent", cl.RetryBudget.BudgetPercent, 0, 100)
		checkRange(p, where, "retry_budget.min_retry_concurrency", cl.RetryBudget.MinRetryConcurrency, 0, 10_000)
	}
	for _, r := range c.Routes {
		if r.MaxConcurrentRequests < 0 {
			p.add("route %q: max_concurrent_requests %d must not be negative", r.ID, r.MaxConcurrentRequests)
		}
	}
	al := c.Telemetry.AccessLog
	if v := *al.SuccessSampleRate; v < 0 || v > 1 {
		p.add("telemetry.access_log: success_sample_rate %v must be between 0 and 1", v)
	}
	checkRange(p, "telemetry.access_log", "errors_per_second", al.ErrorsPerSecond, 1, 1_000_000)
	for _, h := range append(append([]string{}, al.Headers...), al.RedactHeaders...) {
		if !validHeaderName(h) {
			p.add("telemetry.access_log: %q is not a header name", h)
		}
	}
	tr := c.Telemetry.Tracing
	if v := *tr.SampleRatio; v < 0 || v > 1 {
		p.add("telemetry.tracing: sample_ratio %v must be between 0 and 1", v)
	}
	if tr.OTLPEndpoint != "" {
		if u, err := url.Parse(tr.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("telemetry.tracing: otlp_endpoint %q must be an http(s) URL", tr.OTLPEndpoint)
		}
	}
}
