package cluster

import (
	"log/slog"
	"sync"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// Set is what clusters keep across snapshot swaps: each cluster's State
// (keyed by cluster name, endpoints by address), the upstream connection
// pools, the active health checkers and the h2c transports. Runtimes build
// their clusters from it; after a swap, Retain drops what the new
// clusters no longer use.
type Set struct {
	metrics  *Metrics
	log      *slog.Logger
	region   string
	pools    pools
	checkers checkers
	h2c      h2cTransports

	mu     sync.Mutex
	states map[string]*State
}

// NewSet returns an empty set. region is where the proxy runs: endpoints
// in the same region are preferred while any of them is available.
func NewSet(m *Metrics, log *slog.Logger, region string) *Set {
	s := &Set{metrics: m, log: log, region: region, states: map[string]*State{}}
	s.checkers.metrics, s.checkers.log = m, log
	return s
}

// Build compiles a snapshot's clusters, carrying over state from the set
// and round-robin positions from prev (the active runtime's clusters; nil
// for none). It starts nothing: Retain does, once they are active.
func (s *Set) Build(cs []snapshot.Cluster, prev map[string]*Cluster) map[string]*Cluster {
	out := make(map[string]*Cluster, len(cs))
	for i := range cs {
		cl := &cs[i]
		out[cl.Name] = s.build(cl, prev[cl.Name])
	}
	return out
}

// Retain runs once clusters are active: it closes the pools and forgets
// the state of clusters and endpoints they no longer have, and starts,
// updates or stops health checkers to match them.
func (s *Set) Retain(clusters map[string]*Cluster) {
	s.pools.retain(clusters)
	s.retainStates(clusters)
	s.checkers.sync(clusters)
}

// Close stops every health checker and closes every upstream connection.
func (s *Set) Close() {
	s.h2c.closeAll()
	s.checkers.stopAll()
	s.pools.closeAll()
}

// Tracks reports whether the set holds state for the endpoint addr of the
// named cluster.
func (s *Set) Tracks(cluster, addr string) bool {
	s.mu.Lock()
	cs := s.states[cluster]
	s.mu.Unlock()
	if cs == nil {
		return false
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	_, ok := cs.endpoints[addr]
	return ok
}

// Limiter returns the named cluster's connection limiter
// (max_connections, max_pending), or nil for a cluster the set does not
// know.
func (s *Set) Limiter(cluster string) *upstream.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs := s.states[cluster]; cs != nil {
		return cs.limiter
	}
	return nil
}
