package proxy

import (
	"sync"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// clusterRT is one cluster of a runtime: its endpoints and the smooth
// weighted round-robin state that spreads requests over them.
type clusterRT struct {
	name      string
	endpoints []*endpointRT

	mu      sync.Mutex
	current []int // smooth WRR current weights, one per endpoint
	total   int
}

type endpointRT struct {
	addr   string
	weight int
	region string
	zone   string
	pool   *upstream.Pool
}

func newClusterRT(cl *snapshot.Cluster, pl *pools, old *clusterRT) *clusterRT {
	c := &clusterRT{name: cl.Name, current: make([]int, len(cl.Endpoints))}
	cfg := upstream.PoolConfig{
		ConnectTimeout: time.Duration(cl.ConnectTimeoutMs) * time.Millisecond,
		MaxIdle:        cl.MaxIdlePerEndpoint,
	}
	for _, e := range cl.Endpoints {
		c.endpoints = append(c.endpoints, &endpointRT{
			addr: e.Address, weight: e.Weight, region: e.Region, zone: e.Zone,
			pool: pl.get(poolKey{addr: e.Address, cfg: cfg}),
		})
		c.total += e.Weight
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
// does): every endpoint gains its weight, the largest is chosen and pays the
// total. Over any window of `total` picks each endpoint is chosen exactly
// weight times, interleaved rather than in runs. skip, when not nil, is
// avoided if another endpoint exists (for retries).
func (c *clusterRT) pick(skip *endpointRT) *endpointRT {
	if len(c.endpoints) == 1 {
		return c.endpoints[0]
	}
	c.mu.Lock()
	best := -1
	for i, e := range c.endpoints {
		c.current[i] += e.weight
		if e == skip {
			continue
		}
		if best < 0 || c.current[i] > c.current[best] {
			best = i
		}
	}
	total := c.total
	if skip != nil {
		total -= skip.weight
		for i, e := range c.endpoints {
			if e == skip {
				c.current[i] -= e.weight
			}
		}
	}
	c.current[best] -= total
	c.mu.Unlock()
	return c.endpoints[best]
}
