package quota

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// globalPolicy is the lease side of a policy with global set: what it
// enforces follows its region's lease in the region state in force.
type globalPolicy struct {
	id, region string
	g          snapshot.Global
	redis      bool // the Redis store holds the whole regional lease
	mu         sync.Mutex
	cur        atomic.Pointer[leaseView]
}

// leaseView is what a global policy enforces under one region state until
// a time.
type leaseView struct {
	src   *regionstate.State
	until int64 // ns since the Limiter's base: the lease expires (math.MaxInt64: the floor holds)
	// rate and burst of this proxy's local buckets (the lease divided by
	// the region's ready nodes); regional* of the Redis bucket.
	rate, burst     float64
	regionalRate    float64
	regionalBurst   float64
	args            []any // the Redis script's rate and burst
	leased          bool  // false: the floor share (no lease, or it expired)
	nodes           uint64
	leaseExpiresUTC time.Time
}

// Lease says what a global policy enforces now, for status and tests.
type Lease struct {
	Leased    bool    // false: the floor share (no lease, or it expired)
	PerSecond float64 // this proxy's local rate (the regional one divided by Nodes)
	Burst     float64
	Regional  float64 // the region's rate (the lease, or the floor share)
	Nodes     uint64  // the divisor (at least 1)
	Expires   time.Time
}

// view returns what gp enforces at now (ns since base; at is the same
// instant as a time) under the state st.
func (gp *globalPolicy) view(st *regionstate.State, now int64, at time.Time, base time.Time) *leaseView {
	if v := gp.cur.Load(); v != nil && v.src == st && now < v.until {
		return v
	}
	gp.mu.Lock()
	defer gp.mu.Unlock()
	if v := gp.cur.Load(); v != nil && v.src == st && now < v.until {
		return v
	}
	v := &leaseView{src: st, until: math.MaxInt64}
	l, ok := st.QuotaLease(gp.id, gp.region)
	v.nodes = max(1, l.Nodes) // an expired lease still names the region's nodes
	switch {
	case ok && l.Expires.After(at):
		v.leased, v.leaseExpiresUTC = true, l.Expires
		v.regionalRate, v.regionalBurst = float64(l.PerSecond), float64(max(1, l.Burst))
		v.until = int64(l.Expires.Sub(base))
	default:
		floor := gp.g.RatePerSecond * uint64(gp.g.FloorSharePercent) / 100
		v.regionalRate = float64(floor)
		v.regionalBurst = float64(max(1, gp.g.Burst*floor/max(1, gp.g.RatePerSecond)))
	}
	v.rate = v.regionalRate / float64(v.nodes)
	v.burst = max(1, math.Floor(v.regionalBurst/float64(v.nodes)))
	if gp.redis {
		v.args = []any{strconv.FormatFloat(v.regionalRate, 'g', -1, 64), strconv.FormatFloat(v.regionalBurst, 'g', -1, 64)}
	}
	gp.cur.Store(v)
	return v
}

// Lease reports what the global policy id enforces now; ok is false for
// an unknown or not global policy.
func (l *Limiter) Lease(id string) (Lease, bool) {
	if l == nil {
		return Lease{}, false
	}
	p := l.policies[id]
	if p == nil || p.global == nil {
		return Lease{}, false
	}
	at := l.now()
	v := p.global.view(l.state(), int64(at.Sub(l.base)), at, l.base)
	return Lease{Leased: v.leased, PerSecond: v.rate, Burst: v.burst, Regional: v.regionalRate, Nodes: v.nodes,
		Expires: v.leaseExpiresUTC}, true
}

// state is the region state in force (nil: none, or no source).
func (l *Limiter) state() *regionstate.State {
	if l.leases == nil {
		return nil
	}
	return l.leases()
}
