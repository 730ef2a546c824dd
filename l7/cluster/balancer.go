package cluster

import (
	"sync"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// Cluster is one cluster of a runtime: its settings, its endpoints, the
// state it shares with earlier runtimes, and the smooth weighted
// round-robin state that spreads requests over the available endpoints.
// Name and Config are read-only.
type Cluster struct {
	Name   string
	Config *snapshot.Cluster

	state     *State
	region    string // the proxy's region: its endpoints are preferred
	endpoints []*Endpoint

	mu      sync.Mutex
	current []int  // smooth WRR current weights, one per endpoint
	ok      []bool // scratch: eligible in this pick
}

// Endpoint is one endpoint of a cluster; its fields are read-only.
type Endpoint struct {
	Addr   string
	Weight int
	Region string
	Zone   string
	Pool   *upstream.Pool
	state  *endpointState
}

// Filter narrows the endpoints a pick may choose by region (the regional
// stage sets one per request); nil allows every endpoint.
type Filter interface {
	Allows(region string) bool
}

// build compiles one cluster of a snapshot; its state, pools and (when
// the endpoints are unchanged) its round-robin position carry over.
func (s *Set) build(cl *snapshot.Cluster, old *Cluster) *Cluster {
	cs := s.state(cl)
	c := &Cluster{Name: cl.Name, Config: cl, state: cs, region: s.region,
		current: make([]int, len(cl.Endpoints)), ok: make([]bool, len(cl.Endpoints))}
	cfg := upstream.PoolConfig{
		ConnectTimeout: time.Duration(cl.ConnectTimeoutMs) * time.Millisecond,
		MaxIdle:        cl.MaxIdlePerEndpoint,
		Limiter:        cs.limiter,
	}
	for _, e := range cl.Endpoints {
		c.endpoints = append(c.endpoints, &Endpoint{
			Addr: e.Address, Weight: e.Weight, Region: e.Region, Zone: e.Zone,
			Pool:  s.pools.get(poolKey{cluster: cl.Name, addr: e.Address, cfg: cfg}),
			state: cs.endpoint(e.Address),
		})
	}
	if old != nil && sameEndpoints(old, c) {
		old.mu.Lock()
		copy(c.current, old.current)
		old.mu.Unlock()
	}
	return c
}

func sameEndpoints(a, b *Cluster) bool {
	if len(a.endpoints) != len(b.endpoints) {
		return false
	}
	for i := range a.endpoints {
		if a.endpoints[i].Addr != b.endpoints[i].Addr || a.endpoints[i].Weight != b.endpoints[i].Weight {
			return false
		}
	}
	return true
}

// Endpoints returns the cluster's endpoints in configured order (the
// slice is shared: do not change it).
func (c *Cluster) Endpoints() []*Endpoint { return c.endpoints }

// Pick returns the next endpoint by smooth weighted round-robin (as nginx
// does: every eligible endpoint gains its weight, the largest is chosen and
// pays the total; over any window each is chosen in proportion to its
// weight, interleaved). Eligible means allowed by only (nil: all), healthy
// and not ejected; among those, the proxy's own region is preferred when
// it has any. skip (the endpoint a retry comes from) is avoided when
// another is eligible. With no eligible endpoint, a cluster in fail_closed
// panic mode returns nil; in all_endpoints mode every endpoint only allows
// becomes eligible. panicked reports that.
func (c *Cluster) Pick(skip *Endpoint, only Filter) (e *Endpoint, panicked bool) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	avail, local := c.classify(now, skip, only)
	if avail == 0 && skip != nil {
		avail, local = c.classify(now, nil, only)
	}
	if avail == 0 {
		if c.Config.PanicMode != "all_endpoints" {
			return nil, true
		}
		avail, local, panicked = 0, 0, true
		for i, ep := range c.endpoints {
			c.ok[i] = only == nil || only.Allows(ep.Region)
			if c.ok[i] {
				avail++
			}
		}
		if avail == 0 {
			return nil, true
		}
	}
	onlyLocal := c.region != "" && local > 0 && local < avail
	best, total := -1, 0
	for i, ep := range c.endpoints {
		if !c.ok[i] || (onlyLocal && ep.Region != c.region) {
			continue
		}
		c.current[i] += ep.Weight
		total += ep.Weight
		if best < 0 || c.current[i] > c.current[best] {
			best = i
		}
	}
	c.current[best] -= total
	return c.endpoints[best], panicked
}

// classify marks the eligible endpoints and counts them (all, and in the
// proxy's region). The caller holds c.mu.
func (c *Cluster) classify(now int64, skip *Endpoint, only Filter) (avail, local int) {
	for i, ep := range c.endpoints {
		ok := ep != skip && ep.state.available(now) && (only == nil || only.Allows(ep.Region))
		c.ok[i] = ok
		if ok {
			avail++
			if c.region != "" && ep.Region == c.region {
				local++
			}
		}
	}
	return avail, local
}
