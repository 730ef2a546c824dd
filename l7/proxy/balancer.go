package proxy

import (
	"sync"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// clusterRT is one cluster of a runtime: its settings, its endpoints, the
// state it shares with earlier runtimes, and the smooth weighted
// round-robin state that spreads requests over the available endpoints.
type clusterRT struct {
	name      string
	cfg       *snapshot.Cluster
	state     *clusterState
	region    string // the proxy's region: its endpoints are preferred
	endpoints []*endpointRT

	mu      sync.Mutex
	current []int  // smooth WRR current weights, one per endpoint
	ok      []bool // scratch: eligible in this pick
}

type endpointRT struct {
	addr   string
	weight int
	region string
	zone   string
	pool   *upstream.Pool
	state  *endpointState
}

func newClusterRT(cl *snapshot.Cluster, env *runtimeEnv, old *clusterRT) *clusterRT {
	cs := env.states.cluster(cl)
	c := &clusterRT{name: cl.Name, cfg: cl, state: cs, region: env.region,
		current: make([]int, len(cl.Endpoints)), ok: make([]bool, len(cl.Endpoints))}
	cfg := upstream.PoolConfig{
		ConnectTimeout: time.Duration(cl.ConnectTimeoutMs) * time.Millisecond,
		MaxIdle:        cl.MaxIdlePerEndpoint,
		Limiter:        cs.limiter,
	}
	for _, e := range cl.Endpoints {
		c.endpoints = append(c.endpoints, &endpointRT{
			addr: e.Address, weight: e.Weight, region: e.Region, zone: e.Zone,
			pool:  env.pools.get(poolKey{cluster: cl.Name, addr: e.Address, cfg: cfg}),
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

func sameEndpoints(a, b *clusterRT) bool {
	if len(a.endpoints) != len(b.endpoints) {
		return false
	}
	for i := range a.endpoints {
		if a.endpoints[i].addr != b.endpoints[i].addr || a.endpoints[i].weight != b.endpoints[i].weight {
			return false
		}
	}
	return true
}

// pick returns the next endpoint by smooth weighted round-robin (as nginx
// does: every eligible endpoint gains its weight, the largest is chosen and
// pays the total; over any window each is chosen in proportion to its
// weight, interleaved). Eligible means healthy and not ejected; among those,
// the proxy's own region is preferred when it has any. skip (the endpoint
// a retry comes from) is avoided when another is eligible. With no eligible
// endpoint, a cluster in fail_closed panic mode returns nil; in
// all_endpoints mode every endpoint becomes eligible. panicked reports that.
func (c *clusterRT) pick(skip *endpointRT) (e *endpointRT, panicked bool) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	avail, local := c.classify(now, skip)
	if avail == 0 && skip != nil {
		avail, local = c.classify(now, nil)
	}
	if avail == 0 {
		if c.cfg.PanicMode != "all_endpoints" {
			return nil, true
		}
		for i := range c.ok {
			c.ok[i] = true
		}
		avail, local, panicked = len(c.ok), 0, true
	}
	onlyLocal := c.region != "" && local > 0 && local < avail
	best, total := -1, 0
	for i, ep := range c.endpoints {
		if !c.ok[i] || (onlyLocal && ep.region != c.region) {
			continue
		}
		c.current[i] += ep.weight
		total += ep.weight
		if best < 0 || c.current[i] > c.current[best] {
			best = i
		}
	}
	c.current[best] -= total
	return c.endpoints[best], panicked
}

// classify marks the eligible endpoints and counts them (all, and in the
// proxy's region). The caller holds c.mu.
func (c *clusterRT) classify(now int64, skip *endpointRT) (avail, local int) {
	for i, ep := range c.endpoints {
		ok := ep != skip && ep.state.available(now)
		c.ok[i] = ok
		if ok {
			avail++
			if c.region != "" && ep.region == c.region {
				local++
			}
		}
	}
	return avail, local
}
