package plane

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Offer is a snapshot for a node.
type Offer struct {
	Revision string
	Version  snapshot.Version
	File     []byte
}

// WatchSnapshot answers a node's long-poll: the snapshot its stage
// allows when that is newer than the version the node has, at once or as
// soon as one exists; nil when the wait ends without one (the timeout
// the node asked for, else WatchTimeout).
func (p *Plane) WatchSnapshot(ctx context.Context, q model.WatchQuery) (*Offer, error) {
	timer := time.NewTimer(p.timeout(q))
	defer timer.Stop()
	for {
		wake := p.hub.wait()
		v := p.view.Load()
		if id, ver := p.assign(v, q.Identity); id != "" && q.Version.Less(ver) {
			f, err := p.snapshotFile(ctx, id)
			if err != nil {
				return nil, err
			}
			return &Offer{Revision: id, Version: ver, File: f}, nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// WatchDeny answers a node's long-poll of the deny channel: the signed
// list when its sequence is above the node's, at once or as soon as one
// is; nil when the wait ends without one.
func (p *Plane) WatchDeny(ctx context.Context, q model.WatchQuery) (seq uint64, file []byte, err error) {
	timer := time.NewTimer(p.timeout(q))
	defer timer.Stop()
	for {
		wake := p.hub.wait()
		if d := p.view.Load().deny; d != nil && d.Sequence > q.Sequence && len(d.File) > 0 {
			return d.Sequence, d.File, nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return 0, nil, nil
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

func (p *Plane) timeout(q model.WatchQuery) time.Duration {
	if q.Timeout > 0 {
		return q.Timeout
	}
	return p.o.WatchTimeout
}

// Report records a node's status report (any instance may take it).
func (p *Plane) Report(ctx context.Context, s model.Status) error {
	if err := s.Identity.Validate(); err != nil {
		return badRequest("%v", err)
	}
	if err := checkText("last_error", s.LastError, 2048); err != nil {
		return err
	}
	if s.ErrorRate < 0 || s.ErrorRate > 1 || s.LatencyMs < 0 || s.Errors > s.Requests {
		return badRequest("error_rate must be within 0..1, latency_ms and errors not negative, errors at most requests")
	}
	if err := checkText("refused_reason", s.RefusedReason, 2048); err != nil {
		return err
	}
	if err := checkRegionReport(&s); err != nil {
		return err
	}
	if err := checkQuotaDemand(&s); err != nil { // lease.go
		return err
	}
	if err := p.st.PutNode(ctx, &model.Node{Status: s, SeenAt: time.Now().UTC(), Instance: p.st.Leader().Instance}); err != nil {
		return err
	}
	p.nodeReported(s) // engine.go: wakes the engine when the report can move the rollout
	p.RegionStateChanged()
	return nil
}

// Bounds of the regional parts of a report.
const (
	MaxReportClusters   = 4096
	MaxReportAnnouncing = 4096
	MaxReportVIPs       = 4096
	maxReportVIPText    = 2048
)

// checkRegionReport checks the clusters and announced prefixes of a
// report, and writes the prefixes canonically (masked, sorted, unique).
func checkRegionReport(s *model.Status) error {
	if len(s.Clusters) > MaxReportClusters {
		return badRequest("%d clusters is over the %d limit", len(s.Clusters), MaxReportClusters)
	}
	for i, c := range s.Clusters {
		if err := checkText("clusters name", c.Name, 256); err != nil || c.Name == "" {
			return badRequest("clusters[%d]: name %.64q is empty, too long or has a control character", i, c.Name)
		}
		if c.Healthy < 0 || c.Total < c.Healthy {
			return badRequest("clusters[%d] (%s): healthy %d of %d is not 0 <= healthy <= total", i, c.Name, c.Healthy, c.Total)
		}
	}
	if len(s.Announcing) > MaxReportAnnouncing {
		return badRequest("%d announced prefixes is over the %d limit", len(s.Announcing), MaxReportAnnouncing)
	}
	out := make([]string, 0, len(s.Announcing))
	for i, a := range s.Announcing {
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			return badRequest("announcing[%d]: %v", i, err)
		}
		out = append(out, pfx.Masked().String())
	}
	slices.Sort(out)
	s.Announcing = slices.Compact(out)
	if len(s.Announcing) > 0 {
		s.AgentSeen = true
	}
	return checkVIPReport(s)
}

// checkVIPReport checks the per-VIP anycast states and the guard of a
// report and writes the prefixes masked, the VIPs sorted by prefix.
func checkVIPReport(s *model.Status) error {
	if len(s.VIPs) > MaxReportVIPs {
		return badRequest("%d VIPs is over the %d limit", len(s.VIPs), MaxReportVIPs)
	}
	for i := range s.VIPs {
		v := &s.VIPs[i]
		pfx, err := netip.ParsePrefix(v.Prefix)
		if err != nil {
			return badRequest("vips[%d]: %v", i, err)
		}
		v.Prefix = pfx.Masked().String()
		if !model.KnownVIPState(v.State) {
			return badRequest("vips[%d] (%s): state %.32q is not announced, draining, held, withdrawn or unknown", i, v.Prefix, v.State)
		}
		for _, f := range []struct{ what, text string }{{"reason", v.Reason}, {"drained", v.Drained}, {"guard_verdict", v.GuardVerdict}} {
			if err := checkText(fmt.Sprintf("vips[%d] %s", i, f.what), f.text, maxReportVIPText); err != nil {
				return err
			}
		}
		if v.OtherSites < 0 {
			return badRequest("vips[%d] (%s): other_sites %d is negative", i, v.Prefix, v.OtherSites)
		}
	}
	slices.SortStableFunc(s.VIPs, func(a, b model.VIPReport) int { return strings.Compare(a.Prefix, b.Prefix) })
	if g := s.Guard; g != nil {
		if g.MinSites < 0 || g.Holding < 0 {
			return badRequest("guard: min_sites %d and holding %d must not be negative", g.MinSites, g.Holding)
		}
		if err := checkText("guard source", g.Source, maxReportVIPText); err != nil {
			return err
		}
	}
	if len(s.VIPs) > 0 || s.Guard != nil {
		s.AgentSeen = true
	}
	return nil
}
