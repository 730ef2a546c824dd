package cluster

import (
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// State is what a cluster remembers across snapshot swaps: its breaker and
// retry-budget counters, its connection limiter, and the state of each
// endpoint by address.
type State struct {
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

// state returns the named cluster's state, made on first use, with its
// connection limits set from cl.
func (s *Set) state(cl *snapshot.Cluster) *State {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.states[cl.Name]
	if cs == nil {
		cs = &State{name: cl.Name, metrics: s.metrics, log: s.log, endpoints: map[string]*endpointState{},
			limiter: upstream.NewLimiter(cl.CircuitBreaker.MaxConnections, cl.CircuitBreaker.MaxPending)}
		s.states[cl.Name] = cs
	}
	cs.limiter.SetLimits(cl.CircuitBreaker.MaxConnections, cl.CircuitBreaker.MaxPending)
	return cs
}

func (cs *State) endpoint(addr string) *endpointState {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	es := cs.endpoints[addr]
	if es == nil {
		es = &endpointState{addr: addr}
		cs.endpoints[addr] = es
	}
	return es
}

// retainStates drops the state of clusters and endpoints that clusters no
// longer has; what is unchanged keeps its state.
func (s *Set) retainStates(clusters map[string]*Cluster) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, cs := range s.states {
		c := clusters[name]
		if c == nil {
			delete(s.states, name)
			continue
		}
		keep := map[string]bool{}
		for _, e := range c.endpoints {
			keep[e.Addr] = true
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

// Admit counts a request against the cluster's circuit breaker
// (max_requests in flight); false means the breaker is open and nothing
// was counted. Every true is paired with a Done.
func (c *Cluster) Admit() bool {
	if c.state.requests.Add(1) > int64(c.Config.CircuitBreaker.MaxRequests) {
		c.state.requests.Add(-1)
		return false
	}
	return true
}

// Done ends a request Admit counted.
func (c *Cluster) Done() { c.state.requests.Add(-1) }

// InFlight is the cluster's requests in flight, as the breaker counts them.
func (c *Cluster) InFlight() int64 { return c.state.requests.Load() }

// Pending is the requests waiting for an upstream connection
// (circuit_breaker.max_pending).
func (c *Cluster) Pending() int64 { return c.state.limiter.Pending() }

// AdmitRetry charges a retry to the budget: retries in flight stay at most
// budget_percent of requests in flight, but min_retry_concurrency are
// always allowed. The caller calls the returned func when the retry ends.
// A refusal counts in rampart_retry_budget_exhausted_total.
func (c *Cluster) AdmitRetry() (func(), bool) {
	cs, b := c.state, c.Config.RetryBudget
	limit := cs.requests.Load() * int64(b.BudgetPercent) / 100
	if limit < int64(b.MinRetryConcurrency) {
		limit = int64(b.MinRetryConcurrency)
	}
	if cs.retries.Add(1) > limit {
		cs.retries.Add(-1)
		cs.metrics.BudgetExhausted.WithLabelValues(c.Name).Inc()
		return nil, false
	}
	return func() { cs.retries.Add(-1) }, true
}

// Backoff is the wait before retry n (1-based): full jitter over an
// exponential ceiling, 25 ms doubling to at most 250 ms.
func Backoff(n int) time.Duration {
	ceil := 25 * time.Millisecond << min(n-1, 4)
	ceil = min(ceil, 250*time.Millisecond)
	return time.Duration(rand.Int64N(int64(ceil)))
}

// State returns the state the cluster shares with the same-named cluster
// of earlier and later runtimes.
func (c *Cluster) State() *State { return c.state }
