package stage

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

type stageClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stageClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stageClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// The quota stage under a global policy answers by the region's lease from
// the region state in force: the lease divided by the region's nodes, a
// new lease at once, and 429 once it expired with a floor of 0.
func TestQuotaStageGlobalLease(t *testing.T) {
	env, routes := testEnv(t)
	clk := &stageClock{t: time.Unix(1_800_000_000, 0)}
	var st atomic.Pointer[regionstate.State]
	ql, err := quota.New([]snapshot.QuotaPolicy{{ID: "two", Key: []string{"tenant"}, Store: "local",
		Global: &snapshot.Global{RatePerSecond: 1000, Burst: 100, LeaseTTLMs: 10_000, RebalanceMs: 2000}}},
		"eu", nil, quota.Options{Now: clk.Now, Leases: st.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ql.Close() })
	env.Quota = ql
	var all *Route
	for _, r := range routes {
		if r.Config.ID == "all" {
			all = r
		}
	}
	lease := func(perSecond, burst, nodes uint64, ttl time.Duration) {
		st.Store(&regionstate.State{Regions: []regionstate.Region{{Name: "eu", Healthy: true}},
			QuotaLeases: []regionstate.QuotaLease{{Policy: "two", Region: "eu", PerSecond: perSecond, Burst: burst, Nodes: nodes, Expires: clk.Now().Add(ttl)}}})
	}
	key := map[string]string{"X-Api-Key": apiKey}
	admitted := func(n int) (int, string) {
		got, limit := 0, ""
		for range n {
			w, _ := serve(t, env, all, key)
			if w.Code == 299 {
				got++
			}
			limit = w.Header().Get("RateLimit-Limit")
		}
		return got, limit
	}
	lease(3, 6, 3, 10*time.Second) // 1/s and a burst of 2 on this node
	if got, limit := admitted(5); got != 2 || limit != "2" {
		t.Fatalf("lease 3/s burst 6 over 3 nodes: %d of 5 admitted, RateLimit-Limit %q; want 2 and \"2\"", got, limit)
	}
	lease(30, 30, 3, 10*time.Second) // 10/s and 10 on this node
	clk.Advance(time.Second)
	if got, limit := admitted(15); got != 10 || limit != "10" {
		t.Fatalf("renewed lease 30/s burst 30 over 3 nodes, 1 s later: %d of 15 admitted, RateLimit-Limit %q; want 10 and \"10\"", got, limit)
	}
	clk.Advance(10 * time.Second) // expired, floor 0: nothing
	if got, _ := admitted(3); got != 0 {
		t.Fatalf("expired lease, floor 0: %d of 3 admitted, want 0", got)
	}
}
