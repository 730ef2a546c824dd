package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/listener"
	"github.com/rampart-edge/rampart/l7/stage"
)

// Metrics are the proxy's Prometheus series, registered on their own registry.
type Metrics struct {
	Registry *prometheus.Registry

	requests       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	upstreamErrors *prometheus.CounterVec
	upstreamTries  *prometheus.CounterVec
	unmatched      *prometheus.CounterVec
	snapRejected   *prometheus.CounterVec
	snapSwaps      prometheus.Counter
	badRequests    *prometheus.CounterVec
	tunnelIdle     prometheus.Counter

	shed         *prometheus.CounterVec
	faults       *prometheus.CounterVec
	denyRejected *prometheus.CounterVec
	denySequence prometheus.Gauge
	denyEntries  prometheus.Gauge
	quota        *prometheus.CounterVec

	cluster  *cluster.Metrics
	stage    *stage.Metrics
	listener *listener.Metrics

	mu     sync.Mutex
	routes map[string]*routeStats // by route id, kept across snapshot swaps
}

// NewMetrics registers the proxy's series and the Go/process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_requests_total", Help: "Requests served, by route, revision and status code (499: client went away).",
		}, []string{"route", "revision", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rampart_request_duration_seconds", Help: "Time from request head to the end of the response, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_upstream_errors_total", Help: "Failed upstream exchanges, by cluster and kind (connect, timeout, reset, malformed, pool_closed).",
		}, []string{"cluster", "kind"}),
		upstreamTries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_upstream_retries_total", Help: "Upstream attempts after the first, by cluster and reason (stale_connection, status).",
		}, []string{"cluster", "reason"}),
		unmatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_unmatched_requests_total", Help: "Requests answered without a route: 400 bad path, 404, 405, 503 no snapshot.",
		}, []string{"code"}),
		snapRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_snapshot_rejected_total", Help: "Snapshot files refused, by reason.",
		}, []string{"reason"}),
		snapSwaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rampart_snapshot_swaps_total", Help: "Snapshots activated.",
		}),
		badRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_bad_requests_total", Help: "Requests refused as malformed, by status and reason: by the HTTP/1.1 parser (400, 417, 431, 501, 505) or by the checks every protocol shares (400: method, header, host, target, path, query).",
		}, []string{"code", "reason"}),
		tunnelIdle: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rampart_websocket_tunnels_idle_closed_total", Help: "WebSocket tunnels closed because no byte went either way for the listener's tunnel_idle_timeout_ms.",
		}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_shed_total", Help: "Requests refused at once with 503, by scope (global, route, breaker, connections).",
		}, []string{"scope"}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_request_errors_total", Help: "Failed requests by route and whose fault: gateway (shed, internal), upstream (5xx, unreachable, no healthy endpoint), client (4xx, 499).",
		}, []string{"route", "fault"}),
		denyRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_deny_list_rejected_total", Help: "Deny list files refused, by reason.",
		}, []string{"reason"}),
		denySequence: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rampart_deny_list_sequence", Help: "Sequence of the deny list in force (0: none).",
		}),
		denyEntries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rampart_deny_list_entries", Help: "Entries in the deny list in force, expired ones included.",
		}),
		quota: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_quota_decisions_total", Help: "Quota decisions by policy and outcome (allowed, limited, store_error; floor: a global policy decided by its floor share).",
		}, []string{"policy", "outcome"}),
		routes: map[string]*routeStats{},
	}
	m.Registry.MustRegister(m.requests, m.duration, m.upstreamErrors, m.upstreamTries, m.unmatched,
		m.snapRejected, m.snapSwaps, m.badRequests,
		m.tunnelIdle,
		m.shed, m.faults,
		m.denyRejected, m.denySequence, m.denyEntries, m.quota,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.cluster = cluster.NewMetrics(m.Registry)
	m.stage = stage.NewMetrics(m.Registry)
	m.listener = listener.NewMetrics(m.Registry)
	return m
}

// routeStats caches a route's series so the request path does not hash
// label values on every request.
type routeStats struct {
	m        *Metrics
	id       string
	inflight atomic.Int64 // requests of this route in flight (max_concurrent_requests)
	once     sync.Once
	duration prometheus.Observer

	mu    sync.RWMutex
	codes map[codeKey]prometheus.Counter
}

type codeKey struct {
	revision string
	code     int
}

func (m *Metrics) route(id string) *routeStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.routes[id]
	if rs == nil {
		rs = &routeStats{m: m, id: id, codes: map[codeKey]prometheus.Counter{}}
		m.routes[id] = rs
	}
	return rs
}

func (rs *routeStats) observe(revision string, code int, seconds float64) {
	rs.once.Do(func() { rs.duration = rs.m.duration.WithLabelValues(rs.id) })
	rs.duration.Observe(seconds)
	k := codeKey{revision, code}
	rs.mu.RLock()
	c := rs.codes[k]
	rs.mu.RUnlock()
	if c == nil {
		c = rs.m.requests.WithLabelValues(rs.id, revision, strconv.Itoa(code))
		rs.mu.Lock()
		rs.codes[k] = c
		rs.mu.Unlock()
	}
	c.Inc()
}
