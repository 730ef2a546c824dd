package plane

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// RegionRule is how a region's health is judged from its nodes' reports.
//
// A node counts for its region (Identity.Region) when its last report is
// fresh (at most ReportMaxAge old). Of the fresh nodes, a node is ready
// when it reported ready. The region is healthy when it has at least one
// fresh node, at least MinReadyPercent % of its fresh nodes are ready, and
// for each critical cluster at least MinReadyPercent % of its fresh nodes
// are ready and report at least one healthy endpoint of that cluster (a
// node that reports no figure for the cluster, because it has no active
// health check, counts as without one).
type RegionRule struct {
	MinReadyPercent  int           // 1..100; default 60
	CriticalClusters []string      // default none
	ReportMaxAge     time.Duration // default 10s
}

func (r *RegionRule) defaults() error {
	if r.MinReadyPercent == 0 {
		r.MinReadyPercent = 60
	}
	if r.MinReadyPercent < 1 || r.MinReadyPercent > 100 {
		return fmt.Errorf("plane: regions.min_ready_percent %d is outside 1..100", r.MinReadyPercent)
	}
	if r.ReportMaxAge == 0 {
		r.ReportMaxAge = 10 * time.Second
	}
	if r.ReportMaxAge < 0 {
		return fmt.Errorf("plane: regions.report_max_age %s is negative", r.ReportMaxAge)
	}
	return nil
}

// judgeRegions applies the rule to every node record and returns the
// health of each region a node reported, sorted by name.
func judgeRegions(rule RegionRule, nodes []model.Node, now time.Time) []model.RegionHealth {
	by := map[string]*model.RegionHealth{}
	lowest := map[string]snapshot.Version{}
	for _, n := range nodes {
		if n.Region == "" {
			continue
		}
		h := by[n.Region]
		if h == nil {
			h = &model.RegionHealth{Name: n.Region, Versions: map[string]int{}, Clusters: map[string]int{}}
			for _, c := range rule.CriticalClusters {
				h.Clusters[c] = 0
			}
			by[n.Region] = h
		}
		h.Nodes++
		if now.Sub(n.SeenAt) > rule.ReportMaxAge {
			continue
		}
		h.Fresh++
		if !n.Ready {
			continue
		}
		h.Ready++
		h.Versions[n.Active.String()]++
		if lo, ok := lowest[n.Region]; !ok || n.Active.Less(lo) {
			lowest[n.Region] = n.Active
		}
		for _, c := range rule.CriticalClusters {
			if i := slices.IndexFunc(n.Clusters, func(ch model.ClusterHealth) bool { return ch.Name == c }); i >= 0 && n.Clusters[i].Healthy > 0 {
				h.Clusters[c]++
			}
		}
	}
	out := make([]model.RegionHealth, 0, len(by))
	for name, h := range by {
		h.ConfigVersion = lowest[name]
		h.Healthy, h.Why = verdict(rule, h)
		if len(h.Clusters) == 0 {
			h.Clusters = nil
		}
		if len(h.Versions) == 0 {
			h.Versions = nil
		}
		out = append(out, *h)
	}
	slices.SortFunc(out, func(a, b model.RegionHealth) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// verdict decides one region and says why.
func verdict(rule RegionRule, h *model.RegionHealth) (bool, string) {
	if h.Fresh == 0 {
		return false, fmt.Sprintf("no fresh report (0 of %d nodes reported within %s)", h.Nodes, rule.ReportMaxAge)
	}
	pct := func(n int) int { return n * 100 / h.Fresh }
	enough := func(n int) bool { return n*100 >= rule.MinReadyPercent*h.Fresh }
	if !enough(h.Ready) {
		return false, fmt.Sprintf("%d of %d fresh nodes ready (%d%% < %d%%)", h.Ready, h.Fresh, pct(h.Ready), rule.MinReadyPercent)
	}
	var bad []string
	for _, c := range rule.CriticalClusters {
		if n := h.Clusters[c]; !enough(n) {
			bad = append(bad, fmt.Sprintf("cluster %s healthy on %d of %d fresh nodes (%d%% < %d%%)", c, n, h.Fresh, pct(n), rule.MinReadyPercent))
		}
	}
	if len(bad) > 0 {
		return false, strings.Join(bad, "; ")
	}
	why := fmt.Sprintf("%d of %d fresh nodes ready (%d%% >= %d%%)", h.Ready, h.Fresh, pct(h.Ready), rule.MinReadyPercent)
	if len(rule.CriticalClusters) > 0 {
		why += ", every critical cluster healthy on enough of them"
	}
	return true, why
}
