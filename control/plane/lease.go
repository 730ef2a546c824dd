package plane

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Global quota leases: while this instance leads, every global policy of
// the stable revision's config is rebalanced every rebalance_ms: each
// region gets a lease (allocate) of the global rate by the demand its
// fresh nodes reported, valid lease_ttl_ms, and the leases go into the
// region-state document through the lease provider.

// leaseState is the plane's current grants (lease.go, lease_book.go):
// nil while this instance does not lead.
type leaseState struct {
	mu   sync.Mutex
	book *leaseBook
}

// Bounds of a report's quota demand.
const MaxReportQuotaDemand = 4096

// checkQuotaDemand checks a report's demand list: bounded, named, finite
// and not negative, and sorts it by policy.
func checkQuotaDemand(s *model.Status) error {
	if len(s.QuotaDemand) > MaxReportQuotaDemand {
		return badRequest("%d quota demands is over the %d limit", len(s.QuotaDemand), MaxReportQuotaDemand)
	}
	for i, d := range s.QuotaDemand {
		if err := checkText("quota_demand policy", d.Policy, 256); err != nil || d.Policy == "" {
			return badRequest("quota_demand[%d]: policy %.64q is empty, too long or has a control character", i, d.Policy)
		}
		if !(d.PerSecond >= 0) || math.IsInf(d.PerSecond, 0) {
			return badRequest("quota_demand[%d] (%s): per_second %v must be a finite rate, not negative", i, d.Policy, d.PerSecond)
		}
	}
	slices.SortFunc(s.QuotaDemand, func(a, b model.QuotaDemand) int { return cmp.Compare(a.Policy, b.Policy) })
	return nil
}

// leasesFor grants the leases of one global policy at now: the regions
// are the config's and those of fresh nodes (a report at most maxAge old),
// sorted; a region's demand is the sum of its fresh nodes' demand for the
// policy and its node count the number of its fresh ready nodes.
func leasesFor(q *snapshot.QuotaPolicy, cfgRegions []string, nodes []model.Node, now time.Time, maxAge time.Duration) []regionstate.QuotaLease {
	g := q.Global
	if g == nil {
		return nil
	}
	regions := slices.Clone(cfgRegions)
	demand := map[string]float64{}
	ready := map[string]uint64{}
	for _, n := range nodes {
		if n.Region == "" || now.Sub(n.SeenAt) > maxAge {
			continue
		}
		regions = append(regions, n.Region)
		if n.Ready {
			ready[n.Region]++
		}
		for _, d := range n.QuotaDemand {
			if d.Policy == q.ID && d.PerSecond > 0 && !math.IsInf(d.PerSecond, 0) {
				demand[n.Region] += d.PerSecond
			}
		}
	}
	slices.Sort(regions)
	regions = slices.Compact(regions)
	ttl := leaseTTL(g)
	grants := allocate(*g, regions, demand)
	out := make([]regionstate.QuotaLease, len(grants))
	for i, l := range grants {
		out[i] = regionstate.QuotaLease{Policy: q.ID, Region: regions[i], PerSecond: l.PerSecond, Burst: l.Burst,
			Nodes: ready[regions[i]], Expires: now.Add(ttl).UTC()}
	}
	return out
}

// leaseLoop rebalances the leases while ctx lasts (only the leader
// grants; the composer only runs there too).
func (p *Plane) leaseLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(p.rebalanceLeases(ctx, time.Now()))
	}
}

// rebalanceLeases grants new leases to every global policy that is due
// at now (lease_book.go: break before make) and returns how long until
// the next one is. While an old grant still counts it looks at the nodes'
// reports every leaseCheck, and rebalances at once when one no longer
// does and a region's growth was held back.
func (p *Plane) rebalanceLeases(ctx context.Context, now time.Time) time.Duration {
	const idle = time.Second
	ls := &p.leases
	lead := p.st.Leader()
	if !lead.Leader {
		ls.mu.Lock()
		ls.book = nil // a later leadership starts over, conservatively
		ls.mu.Unlock()
		return idle
	}
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.log.Warn("quota leases: config", "err", err)
		}
		return idle
	}
	var global []*snapshot.QuotaPolicy
	var regions []string
	if cfg != nil {
		for i := range cfg.QuotaPolicies {
			if cfg.QuotaPolicies[i].Global != nil {
				global = append(global, &cfg.QuotaPolicies[i])
			}
		}
		for _, r := range cfg.Regions {
			regions = append(regions, r.Name)
		}
	}
	// The last document composed tells which grants it carries.
	p.rs.mu.Lock()
	cur := p.rs.cur
	p.rs.mu.Unlock()
	ls.mu.Lock()
	if ls.book == nil || ls.book.epoch != lead.Epoch {
		ls.book = newLeaseBook(lead.Epoch, now)
	}
	book := ls.book
	if cur != nil {
		book.published(cur.version, cur.state)
	}
	changed := false
	for id := range book.policies { // policies no longer global lose their leases
		if !slices.ContainsFunc(global, func(q *snapshot.QuotaPolicy) bool { return q.ID == id }) {
			delete(book.policies, id)
			changed = true
		}
	}
	watch := len(global) > 0 && (book.pending() || slices.ContainsFunc(global, func(q *snapshot.QuotaPolicy) bool {
		pb := book.policies[q.ID]
		return pb == nil || !now.Before(pb.due)
	}))
	ls.mu.Unlock()
	if watch {
		nodes, err := p.st.Nodes(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("quota leases: nodes", "err", err)
			}
			return idle
		}
		ls.mu.Lock()
		if ls.book == book {
			book.observe(nodes, now)
			for _, q := range global {
				if pb := book.policies[q.ID]; pb == nil || !now.Before(pb.due) {
					book.grant(q, regions, nodes, now, p.o.Regions.ReportMaxAge)
					changed = true
				}
			}
		}
		ls.mu.Unlock()
	}
	if changed {
		p.RegionStateChanged()
	}
	next := idle
	ls.mu.Lock()
	if ls.book != nil {
		for _, pb := range ls.book.policies {
			next = min(next, max(pb.due.Sub(now), time.Millisecond))
		}
		if ls.book.pending() {
			next = min(next, leaseCheck)
		}
	}
	ls.mu.Unlock()
	return next
}

// QuotaLeases are the leases granted now (for the API and tests), sorted
// by policy and region.
func (p *Plane) QuotaLeases() []regionstate.QuotaLease {
	p.leases.mu.Lock()
	defer p.leases.mu.Unlock()
	var out []regionstate.QuotaLease
	if p.leases.book != nil {
		for _, pb := range p.leases.book.policies {
			out = append(out, pb.granted...)
		}
	}
	slices.SortFunc(out, func(a, b regionstate.QuotaLease) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Region, b.Region))
	})
	return out
}

// leaseProvider puts the unexpired leases of regions the document lists
// into it.
type leaseProvider struct{ p *Plane }

func (lp leaseProvider) Contribute(now time.Time, s *regionstate.State) {
	for _, l := range lp.p.QuotaLeases() {
		if _, ok := s.Region(l.Region); ok && l.Expires.After(now) {
			s.QuotaLeases = append(s.QuotaLeases, l)
		}
	}
}
