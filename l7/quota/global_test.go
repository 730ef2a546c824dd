package quota

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func globalQuota(id string, store string) snapshot.QuotaPolicy {
	q := snapshot.QuotaPolicy{ID: id, Key: []string{"tenant"}, Store: store,
		Global: &snapshot.Global{RatePerSecond: 1000, Burst: 100, FloorSharePercent: 10, LeaseTTLMs: 10_000, RebalanceMs: 2000}}
	return q
}

// stateWith is a region state holding one lease of policy in region.
func stateWith(policy, region string, perSecond, burst, nodes uint64, expires time.Time) *regionstate.State {
	return &regionstate.State{Regions: []regionstate.Region{{Name: region, Healthy: true}},
		QuotaLeases: []regionstate.QuotaLease{{Policy: policy, Region: region, PerSecond: perSecond, Burst: burst, Nodes: nodes, Expires: expires}}}
}

// A local global policy enforces its region's lease divided by the
// region's nodes; a new document changes it at once; when the lease
// expires unrenewed it falls back to the floor share, divided likewise;
// without any document it enforces the floor alone.
func TestGlobalLeaseLocal(t *testing.T) {
	clk := newFakeClock()
	var st atomic.Pointer[regionstate.State]
	var floors atomic.Int64
	obs := func(_, outcome string) {
		if outcome == "floor" {
			floors.Add(1)
		}
	}
	l := mustNew(t, []snapshot.QuotaPolicy{globalQuota("g", "local")}, "eu", nil, Options{Now: clk.Now, Leases: st.Load, Observe: obs})

	// No document: the floor, 10% of 1000/s with a burst of 10, on one node.
	if ls, _ := l.Lease("g"); ls.Leased || ls.PerSecond != 100 || ls.Burst != 10 || ls.Nodes != 1 {
		t.Fatalf("no document: %+v, want the floor 100/s burst 10 on 1 node", ls)
	}
	if got := countAllowed(l, "g", "t", 50); got != 10 {
		t.Fatalf("no document: %d of 50 admitted, want the floor's burst 10", got)
	}
	if n := floors.Load(); n != 50 {
		t.Fatalf("no document: %d decisions observed as floor, want 50", n)
	}

	// A lease of 600/s, burst 60, over 3 nodes: 200/s and 20 each.
	st.Store(stateWith("g", "eu", 600, 60, 3, clk.Now().Add(10*time.Second)))
	clk.Advance(time.Second)
	if ls, _ := l.Lease("g"); !ls.Leased || ls.PerSecond != 200 || ls.Burst != 20 || ls.Regional != 600 || ls.Nodes != 3 {
		t.Fatalf("leased: %+v, want 200/s burst 20 of 600/s over 3 nodes", ls)
	}
	if got := countAllowed(l, "g", "t", 100); got != 20 {
		t.Fatalf("leased, after 1 s: %d of 100 admitted, want the bucket capped at the lease's burst 20", got)
	}
	if n := floors.Load(); n != 50 {
		t.Fatalf("leased: %d decisions observed as floor, want still 50", n)
	}
	clk.Advance(50 * time.Millisecond)
	if got := countAllowed(l, "g", "t", 500); got != 10 {
		t.Fatalf("leased, 50 ms later: %d admitted, want 200/s × 0.05 s = 10", got)
	}

	// A renewal with a smaller lease takes effect with the document.
	st.Store(stateWith("g", "eu", 300, 30, 3, clk.Now().Add(10*time.Second)))
	clk.Advance(time.Second)
	if got := countAllowed(l, "g", "t", 500); got != 10 {
		t.Fatalf("smaller lease, 1 s later: %d admitted, want the new burst 10 (100/s per node)", got)
	}

	// The control plane is gone: the lease expires, the floor (100/s over
	// the last document's 3 nodes) holds from then on.
	clk.Advance(8 * time.Second)
	if ls, _ := l.Lease("g"); !ls.Leased {
		t.Fatalf("a second before expiry: %+v, want still leased", ls)
	}
	clk.Advance(time.Second)
	ls, _ := l.Lease("g")
	if ls.Leased || ls.Regional != 100 || ls.Nodes != 3 || ls.Burst != 3 {
		t.Fatalf("after expiry: %+v, want the floor 100/s over 3 nodes, burst 3", ls)
	}
	countAllowed(l, "g", "t", 100) // spend the bucket
	clk.Advance(3 * time.Second)
	if got := countAllowed(l, "g", "t", 500); got != 3 {
		t.Fatalf("floor, 3 s later: %d admitted, want the floor's burst 3", got)
	}
	clk.Advance(45 * time.Millisecond)
	if got := countAllowed(l, "g", "t", 500); got != 1 {
		t.Fatalf("floor, 45 ms later: %d admitted, want 33.3/s × 0.045 s = 1.5, so 1", got)
	}

	// A lease of another region or policy is not this one's.
	st.Store(stateWith("g", "us", 900, 90, 1, clk.Now().Add(10*time.Second)))
	if ls, _ := l.Lease("g"); ls.Leased || ls.Nodes != 1 {
		t.Fatalf("another region's lease: %+v, want the floor on 1 node", ls)
	}
	if _, ok := l.Lease("nope"); ok {
		t.Fatal("Lease of an unknown policy answered")
	}
}

// A floor of 0 with no lease refuses everything; a snapshot swap keeps
// the buckets of an unchanged global policy.
func TestGlobalLeaseZeroFloorAndSwap(t *testing.T) {
	clk := newFakeClock()
	var st atomic.Pointer[regionstate.State]
	q := globalQuota("g", "local")
	q.Global.FloorSharePercent = 0
	l := mustNew(t, []snapshot.QuotaPolicy{q}, "eu", nil, Options{Now: clk.Now, Leases: st.Load})
	if d := l.Take(t.Context(), "g", []byte("t")); d.Allowed || d.RetryAfter != zeroBudgetRetry {
		t.Fatalf("floor 0, no lease: %+v, want refused", d)
	}
	st.Store(stateWith("g", "eu", 10, 5, 1, clk.Now().Add(10*time.Second)))
	if got := countAllowed(l, "g", "t", 3); got != 3 {
		t.Fatalf("leased: %d of 3 admitted", got)
	}
	l2 := mustNew(t, []snapshot.QuotaPolicy{q}, "eu", l, Options{Now: clk.Now, Leases: st.Load})
	if got := countAllowed(l2, "g", "t", 10); got != 2 {
		t.Fatalf("after the swap: %d admitted, want the 2 tokens left", got)
	}
}

// With the Redis store the region's nodes share one bucket holding the
// whole regional lease (not divided), and it follows the lease too.
func TestGlobalLeaseRedis(t *testing.T) {
	srv := startRedis(t)
	clk := newFakeClock()
	var st atomic.Pointer[regionstate.State]
	q := globalQuota("g", "redis")
	q.Redis = &snapshot.RedisStore{Address: srv.addr, TimeoutMs: 1000, FailMode: "closed"}
	a := mustNew(t, []snapshot.QuotaPolicy{q}, "eu", nil, Options{Now: clk.Now, Leases: st.Load})
	b := mustNew(t, []snapshot.QuotaPolicy{q}, "eu", nil, Options{Now: clk.Now, Leases: st.Load})
	st.Store(stateWith("g", "eu", 1, 40, 4, clk.Now().Add(time.Hour)))
	if got := countAllowed(a, "g", "t", 30) + countAllowed(b, "g", "t", 30); got != 40 {
		t.Fatalf("two proxies on the regional lease: %d admitted, want its whole burst 40", got)
	}
	d := a.Take(t.Context(), "g", []byte("t"))
	if d.Allowed || d.Limit != 40 || d.Degraded {
		t.Fatalf("spent: %+v, want refused by Redis with limit 40", d)
	}
}
