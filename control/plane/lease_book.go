package plane

import (
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Break before make: a lease that shrinks stays counted at its old rate
// until no node of its region can still enforce it, and only what is
// left of the global rate after every region's largest lease still in
// force may go to a region whose lease grows. An old grant stops counting
// leaseSlack after its Expires, or leaseSlack after every ready node of
// its region reported holding a region-state document that carries a
// later grant. So at every instant the largest leases the regions' nodes
// may enforce sum to at most the global rate.
//
// A new leader (or a restarted one) does not know what the last leader
// granted: for one lease TTL after it starts leading it grants each
// region at most the floor, which the last leader granted each region too.

// leaseSlack covers a proxy applying a document its node client handed
// over (the region-state watcher polls every 250 ms, l7/regionwatch) and
// clocks up to about a second apart when a lease expires.
const leaseSlack = time.Second

// leaseCheck is how often the plane looks at the nodes' reported
// documents while an old grant still counts.
const leaseCheck = 250 * time.Millisecond

// heldGrant is one grant of a region that its nodes may still enforce.
type heldGrant struct {
	perSecond uint64
	expires   time.Time
	// from is a document version that carries this grant or a later one,
	// as do all after it (zero: none published yet); heldAt is when every
	// ready node of the region was first seen holding from or later.
	from   envelope.Version
	heldAt time.Time
}

// regionHold is a region's grants that may be in force, oldest first;
// the last is the current grant. An older grant not above a newer one is
// dropped (the newer one counts for it), so the rates fall along it.
type regionHold struct{ grants []heldGrant }

// add records a new grant. The older grants not above it fold into it:
// a document that carried the oldest of them carries it or a later grant
// too, so the new entry keeps that one's from and heldAt (what retires the
// larger grants before it), and the new rate and Expires.
func (h *regionHold) add(perSecond uint64, expires time.Time) {
	e := heldGrant{perSecond: perSecond, expires: expires}
	for i, g := range h.grants {
		if g.perSecond <= perSecond {
			e.from, e.heldAt = g.from, g.heldAt
			h.grants = h.grants[:i]
			break
		}
	}
	h.grants = append(h.grants, e)
}

// prune drops the grants no node can enforce at now: expired (plus the
// slack), or older than a grant every ready node has held for the slack.
func (h *regionHold) prune(now time.Time) {
	for j := len(h.grants) - 1; j > 0; j-- {
		if g := h.grants[j]; !g.heldAt.IsZero() && !now.Before(g.heldAt.Add(leaseSlack)) {
			h.grants = h.grants[j:]
			break
		}
	}
	kept := h.grants[:0]
	for _, g := range h.grants {
		if now.Before(g.expires.Add(leaseSlack)) {
			kept = append(kept, g)
		}
	}
	h.grants = kept
}

// ceiling is the largest rate of the region's grants still counted.
func (h *regionHold) ceiling() uint64 {
	var c uint64
	for _, g := range h.grants {
		c = max(c, g.perSecond)
	}
	return c
}

// policyBook is one global policy's grants.
type policyBook struct {
	holds    map[string]*regionHold
	granted  []regionstate.QuotaLease // the current grants, sorted by region
	due      time.Time                // the next rebalance
	withheld bool                     // the last grant gave a region less than its demand share
}

// leaseBook is what the leader granted since it leads (epoch) and when
// that began (since).
type leaseBook struct {
	epoch    uint64
	since    time.Time
	policies map[string]*policyBook
}

func newLeaseBook(epoch uint64, since time.Time) *leaseBook {
	return &leaseBook{epoch: epoch, since: since, policies: map[string]*policyBook{}}
}

func leaseTTL(g *snapshot.Global) time.Duration {
	if g.LeaseTTLMs <= 0 {
		return snapshot.DefaultLeaseTTLMs * time.Millisecond
	}
	return time.Duration(g.LeaseTTLMs) * time.Millisecond
}

// grant rebalances one global policy at now: the demand split of
// leasesFor, each region's rate cut to its floor for one TTL after the
// book began, and growth limited to what the regions' grants still in
// force leave of the global rate.
func (b *leaseBook) grant(q *snapshot.QuotaPolicy, cfgRegions []string, nodes []model.Node, now time.Time, maxAge time.Duration) []regionstate.QuotaLease {
	g := q.Global
	pb := b.policies[q.ID]
	if pb == nil {
		pb = &policyBook{holds: map[string]*regionHold{}}
		b.policies[q.ID] = pb
	}
	out := leasesFor(q, cfgRegions, nodes, now, maxAge)
	ttl := leaseTTL(g)
	blackout := now.Before(b.since.Add(ttl))
	floor := floorRate(*g, len(out))
	want, held := make([]uint64, len(out)), make([]uint64, len(out))
	listed := map[string]bool{}
	for i, l := range out {
		listed[l.Region] = true
		want[i] = l.PerSecond
		if blackout {
			want[i] = min(want[i], floor)
		}
		if h := pb.holds[l.Region]; h != nil {
			h.prune(now)
			held[i] = h.ceiling()
		}
	}
	var other uint64 // regions no longer leased whose grants still count
	for r, h := range pb.holds {
		if !listed[r] {
			h.prune(now)
			if other += h.ceiling(); len(h.grants) == 0 {
				delete(pb.holds, r)
			}
		}
	}
	got := limitGrowth(g.RatePerSecond, want, held, other)
	pb.withheld = false
	for i := range out {
		pb.withheld = pb.withheld || got[i] < want[i]
		out[i].PerSecond = got[i]
		out[i].Burst = max(1, mulDiv(g.Burst, got[i], g.RatePerSecond))
		h := pb.holds[out[i].Region]
		if h == nil {
			h = &regionHold{}
			pb.holds[out[i].Region] = h
		}
		h.add(got[i], out[i].Expires)
	}
	pb.granted = out
	pb.due = now.Add(time.Duration(max(g.RebalanceMs, 1)) * time.Millisecond)
	if blackout {
		pb.due = minTime(pb.due, b.since.Add(ttl))
	}
	return out
}

// published tells the book that document v of this leader carries s's
// leases: each lease's grant, and the region's older grants, are carried
// by v and every later document.
func (b *leaseBook) published(v envelope.Version, s *regionstate.State) {
	if v.Epoch != b.epoch || s == nil {
		return
	}
	for _, l := range s.QuotaLeases {
		pb := b.policies[l.Policy]
		if pb == nil || pb.holds[l.Region] == nil {
			continue
		}
		gs := pb.holds[l.Region].grants
		for k := range gs {
			if gs[k].perSecond != l.PerSecond || !gs[k].expires.Equal(l.Expires) {
				continue
			}
			for i := 0; i <= k; i++ {
				if gs[i].from.IsZero() {
					gs[i].from = v
				}
			}
			break
		}
	}
}

// regionHolds is the oldest document the ready nodes of one region
// report holding.
type regionHolds struct {
	ready  int
	oldest envelope.Version
	ok     bool // every ready node reported a document of this epoch
}

// observe takes the nodes' reports at now: a grant every ready node of its
// region holds (a document at or after its from) is marked held, the
// grants no node can enforce any more are dropped, and a policy that
// withheld growth and now has more room is due at once. It reports
// whether one became due.
func (b *leaseBook) observe(nodes []model.Node, now time.Time) bool {
	regions := map[string]*regionHolds{}
	for _, n := range nodes {
		if !n.Ready || n.Region == "" {
			continue
		}
		rh := regions[n.Region]
		if rh == nil {
			rh = &regionHolds{ok: true}
			regions[n.Region] = rh
		}
		v, err := envelope.ParseVersion(n.RegionState)
		if err != nil || v.Epoch != b.epoch {
			rh.ok = false
			continue
		}
		if rh.ready == 0 || v.Less(rh.oldest) {
			rh.oldest = v
		}
		rh.ready++
	}
	due := false
	for _, pb := range b.policies {
		freed := false
		for r, h := range pb.holds {
			if rh := regions[r]; rh != nil && rh.ok && rh.ready > 0 {
				for i := range h.grants {
					if g := &h.grants[i]; g.heldAt.IsZero() && !g.from.IsZero() && g.from.Compare(rh.oldest) <= 0 {
						g.heldAt = now
					}
				}
			}
			before := h.ceiling()
			h.prune(now)
			freed = freed || h.ceiling() < before
		}
		if freed && pb.withheld && now.Before(pb.due) {
			pb.due = now
			due = true
		}
	}
	return due
}

// pending says whether an old grant still counts: the book then wants to
// see the nodes' reports every leaseCheck.
func (b *leaseBook) pending() bool {
	for _, pb := range b.policies {
		if pb.withheld {
			return true
		}
		for _, h := range pb.holds {
			if len(h.grants) > 1 {
				return true
			}
		}
	}
	return false
}
