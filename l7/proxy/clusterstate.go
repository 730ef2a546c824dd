package proxy

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// clusterState is what a cluster remembers across snapshot swaps: its
// breaker and retry-budget counters, its connection limiter, and the state
// of each endpoint by address.
type clusterState struct {
	name     string
	metrics  *Metrics
	log      *slog.Logger
	ejectMu  sync.Mutex   // serialises ejections (for max_ejection_percent)
	requests atomic.Int64 // requests in flight (breaker max_requests, budget base)
	retries  atomic.Int64 // retries in flight (budget)
	limiter  *upstream.Limiter

	mu        sync.Mutex
	endpoints map[string]*endpointState
}

// endpointState is one endpoint's health: the active check's verdict and
// passive outlier ejection.
type endpointState struct {
	addr      string
	unhealthy atomic.Bool  // failed its active health check
	ejectedAt atomic.Int64 // unix nanos the current ejection ends; 0 when not ejected
	consec5xx atomic.Int32
	consecGW  atomic.Int32

	mu        sync.Mutex
	ejections int       // how many times ejected (the ejection time grows with it)
	lastEject time.Time // for forgetting old ejections
}

// states is the registry of cluster states, keyed by cluster name.
type states struct {
	metrics *Metrics
	log     *slog.Logger
	mu      sync.Mutex
	m       map[string]*clusterState
}

func (s *states) cluster(cl *snapshot.Cluster) *clusterState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*clusterState{}
	}
	cs := s.m[cl.Name]
	if cs == nil {
		cs = &clusterState{name: cl.Name, metrics: s.metrics, log: s.log, endpoints: map[string]*endpointState{},
			limiter: upstream.NewLimiter(cl.CircuitBreaker.MaxConnections, cl.CircuitBreaker.MaxPending)}
		s.m[cl.Name] = cs
	}
	cs.limiter.SetLimits(cl.CircuitBreaker.MaxConnections, cl.CircuitBreaker.MaxPending)
	return cs
}

func (cs *clusterState) endpoint(addr string) *endpointState {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	es := cs.endpoints[addr]
	if es == nil {
		es = &endpointState{addr: addr}
		cs.endpoints[addr] = es
	}
	return es
}

// retain drops the state of clusters and endpoints the runtime no longer
// has; what is unchanged keeps its state.
func (s *states) retain(rt *Runtime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, cs := range s.m {
		c := rt.clusters[name]
		if c == nil {
			delete(s.m, name)
			continue
		}
		keep := map[string]bool{}
		for _, e := range c.endpoints {
			keep[e.addr] = true
		}
		cs.mu.Lock()
		for addr := range cs.endpoints {
			if !keep[addr] {
				delete(cs.endpoints, addr)
			}
		}
		cs.mu.Unlock()
	}
}

// available reports whether the endpoint may take requests now.
func (es *endpointState) available(now int64) bool {
	return !es.unhealthy.Load() && es.ejectedAt.Load() <= now
}

// admitRetry charges a retry to the budget: retries in flight stay at most
// budget_percent of requests in flight, but min_retry_concurrency are
// always allowed. The caller calls the returned func when the retry ends.
func (cs *clusterState) admitRetry(b snapshot.RetryBudget) (func(), bool) {
	limit := cs.requests.Load() * int64(b.BudgetPercent) / 100
	if limit < int64(b.MinRetryConcurrency) {
		limit = int64(b.MinRetryConcurrency)
	}
	if cs.retries.Add(1) > limit {
		cs.retries.Add(-1)
		return nil, false
	}
	return func() { cs.retries.Add(-1) }, true
}

// backoff is the wait before retry n (1-based): full jitter over an
// exponential ceiling, 25 ms doubling to at most 250 ms.
func backoff(n int) time.Duration {
	ceil := 25 * time.Millisecond << min(n-1, 4)
	ceil = min(ceil, 250*time.Millisecond)
	return time.Duration(rand.Int64N(int64(ceil)))
}
