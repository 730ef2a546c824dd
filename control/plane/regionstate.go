package plane

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// RegionStateProvider adds its part to each region-state document the
// plane composes: it may add to or change s (regions are already listed
// and sorted when providers run; Build sorts the rest). It runs on the
// composer's goroutine, must not block, and must only name regions that
// s.Regions lists (for leases and replicas) or Build refuses the document.
type RegionStateProvider interface {
	Contribute(now time.Time, s *regionstate.State)
}

// RegionStateFunc adapts a function to RegionStateProvider.
type RegionStateFunc func(now time.Time, s *regionstate.State)

// Contribute calls f.
func (f RegionStateFunc) Contribute(now time.Time, s *regionstate.State) { f(now, s) }

// AddRegionStateProvider registers a provider; it runs after the plane's
// own (health and drains, writers and lags, sites) on every composition.
// Call RegionStateChanged when what it contributes changes, so a new
// document goes out at once instead of at the next refresh.
func (p *Plane) AddRegionStateProvider(pr RegionStateProvider) {
	p.rs.mu.Lock()
	p.rs.providers = append(p.rs.providers, pr)
	p.rs.mu.Unlock()
	p.RegionStateChanged()
}

// RegionStateChanged asks the composer for a new document now.
func (p *Plane) RegionStateChanged() {
	select {
	case p.rs.kick <- struct{}{}:
	default:
	}
}

// regionStates is the composer's state.
type regionStates struct {
	mu        sync.Mutex
	providers []RegionStateProvider
	kick      chan struct{}
	cur       *composed // the last document, nil before the first

	lagMu sync.Mutex
	lags  map[[2]string]model.ReplicaLag // (platform, region) → latest push; leader's memory only

	cfgMu  sync.Mutex
	cfgID  string
	cfg    *snapshot.Config
	health []model.RegionHealth // as of the last composition
}

// composed is one signed document and what it was made from.
type composed struct {
	version envelope.Version
	state   *regionstate.State
	file    []byte
	key     string // the content without times that only freshen
	at      time.Time
}

// regionStateLoop composes a document on every change (an event, a node
// report, a lag push, a provider's call) and at least every
// RegionStateRefresh, while this instance leads. Changes closer together
// than RegionStateMinInterval are composed once.
func (p *Plane) regionStateLoop(ctx context.Context) {
	t := time.NewTicker(p.o.RegionStateRefresh)
	defer t.Stop()
	var lastErr string
	var loggedAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.rs.kick:
		}
		err := p.composeRegionState(ctx, time.Now())
		switch {
		case err != nil && ctx.Err() == nil:
			// The same failure is logged once per refresh, not per change.
			if err.Error() != lastErr || time.Since(loggedAt) >= p.o.RegionStateRefresh {
				p.log.Warn("compose region state: the last document stays", "err", err)
				lastErr, loggedAt = err.Error(), time.Now()
			}
		case err == nil && lastErr != "":
			p.log.Info("region state composed again")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.o.RegionStateMinInterval):
		}
	}
}

// composeRegionState builds the document from the providers and publishes
// it when its content changed or the last one is RegionStateRefresh old.
func (p *Plane) composeRegionState(ctx context.Context, now time.Time) error {
	lead := p.st.Leader()
	if !lead.Leader {
		return nil
	}
	base, err := p.regionBase(ctx, now)
	if err != nil {
		return err
	}
	p.rs.mu.Lock()
	defer p.rs.mu.Unlock()
	s := base
	for _, pr := range p.rs.providers {
		pr.Contribute(now, s)
	}
	key := contentKey(s)
	prev := p.rs.cur
	if prev != nil && prev.key == key && now.Sub(prev.at) < p.o.RegionStateRefresh && prev.version.Epoch == lead.Epoch {
		return nil
	}
	// Epoch is the control epoch; the sequence grows by at least one per
	// document and follows the clock in milliseconds, so a restarted
	// leader of the same epoch still goes above what it published before.
	v := envelope.Version{Epoch: lead.Epoch, Sequence: uint64(max(now.UnixMilli(), 1))}
	if prev != nil && prev.version.Epoch == v.Epoch && v.Sequence <= prev.version.Sequence {
		v.Sequence = prev.version.Sequence + 1
	}
	s.Version, s.Created = v, now.UTC()
	file, err := regionstate.Build(p.o.Key, s)
	if err != nil {
		return fmt.Errorf("region state %s: %w", v, err)
	}
	p.rs.cur = &composed{version: v, state: s, file: file, key: key, at: now}
	p.hub.broadcast()
	if prev == nil || prev.key != key {
		p.log.Debug("region state published", "version", v.String(), "regions", len(s.Regions), "sites", len(s.Sites))
	}
	return nil
}

// contentKey is the document's content with the times that only freshen
// (created, sites' report times, replicas' observation times) left out: a
// report that changes nothing else does not make a new version before the
// refresh.
func contentKey(s *regionstate.State) string {
	c := *s
	c.Version, c.Created = envelope.Version{}, time.Time{}
	c.Sites = slices.Clone(s.Sites)
	for i := range c.Sites {
		c.Sites[i].ReportedAt = time.Time{}
	}
	c.Platforms = slices.Clone(s.Platforms)
	for i := range c.Platforms {
		reps := slices.Clone(c.Platforms[i].Replicas)
		for j := range reps {
			reps[j].ObservedAt = time.Time{}
		}
		c.Platforms[i].Replicas = reps
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// regionBase is the plane's own part of the document: every region of the
// config (and every region a node reported) with its health, served
// version and drain; every platform of the config with its writer and
// replica lags; every site whose agent reported (and whose node id fits a
// site name: 64 bytes).
func (p *Plane) regionBase(ctx context.Context, now time.Time) (*regionstate.State, error) {
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := p.st.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("region state: nodes: %w", err)
	}
	rc, err := p.regionControl(ctx)
	if err != nil {
		return nil, fmt.Errorf("region state: region control: %w", err)
	}
	health := judgeRegions(p.o.Regions, nodes, now)
	health = withConfigRegions(health, cfg, p.o.Regions)
	s := &regionstate.State{}
	for i := range health {
		h := &health[i]
		if d := drainOf(rc, h.Name); d != nil {
			h.Draining, h.DrainReason = true, d.Reason
		}
		s.Regions = append(s.Regions, regionstate.Region{Name: h.Name, Healthy: h.Healthy, ConfigVersion: envelope.Version(h.ConfigVersion), Draining: h.Draining})
	}
	p.rs.cfgMu.Lock()
	p.rs.health = health
	p.rs.cfgMu.Unlock()
	listed := func(r string) bool { _, ok := s.Region(r); return ok }
	if cfg != nil {
		p.rs.lagMu.Lock()
		for _, pl := range cfg.Platforms {
			out := regionstate.Platform{Name: pl.Name}
			if w := writerOf(rc, pl.Name); w != nil && listed(w.Region) {
				out.Writer, out.WriterEpoch = w.Region, w.Epoch
			}
			for _, r := range s.Regions {
				if l, ok := p.rs.lags[[2]string{pl.Name, r.Name}]; ok {
					out.Replicas = append(out.Replicas, regionstate.Replica{Region: r.Name, LagMs: l.LagMs, ObservedAt: minTime(l.ObservedAt, now)})
				}
			}
			s.Platforms = append(s.Platforms, out)
		}
		p.rs.lagMu.Unlock()
	}
	for _, n := range nodes {
		if !n.AgentSeen || n.Region == "" {
			continue
		}
		if len(n.NodeID) > regionstate.MaxNameBytes {
			// A node id may be 128 bytes, a site name 64: such a node is
			// not a site rather than a document that does not build.
			p.log.Debug("region state: node id too long for a site name", "node", n.NodeID)
			continue
		}
		s.Sites = append(s.Sites, regionstate.Site{Name: n.NodeID, Region: n.Region, Announcing: slices.Clone(n.Announcing), ReportedAt: minTime(n.SeenAt, now)})
	}
	for i := range s.Sites {
		if s.Sites[i].Announcing == nil {
			s.Sites[i].Announcing = []string{}
		}
	}
	return s, nil
}

// withConfigRegions adds the config's regions no node reported (unhealthy:
// no report) and keeps the list sorted.
func withConfigRegions(hs []model.RegionHealth, cfg *snapshot.Config, rule RegionRule) []model.RegionHealth {
	if cfg == nil {
		return hs
	}
	for _, r := range cfg.Regions {
		if slices.ContainsFunc(hs, func(h model.RegionHealth) bool { return h.Name == r.Name }) {
			continue
		}
		h := model.RegionHealth{Name: r.Name}
		h.Healthy, h.Why = verdict(rule, &h)
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b model.RegionHealth) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return hs
}

func minTime(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}

// currentConfig is the config of the stable revision as the store has it
// now (nil before the first), parsed once per revision.
func (p *Plane) currentConfig(ctx context.Context) (*snapshot.Config, error) {
	var stable string
	if err := p.st.View(ctx, func(tx store.Tx) error {
		f, err := tx.Fleet(ctx)
		if err == nil {
			stable = f.Stable
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("region state: fleet: %w", err)
	}
	if stable == "" {
		return nil, nil
	}
	p.rs.cfgMu.Lock()
	if p.rs.cfgID == stable {
		c := p.rs.cfg
		p.rs.cfgMu.Unlock()
		return c, nil
	}
	p.rs.cfgMu.Unlock()
	file, err := p.snapshotFile(ctx, stable)
	if err != nil {
		return nil, fmt.Errorf("region state: stable revision %s: %w", stable, err)
	}
	snap, err := snapshot.Parse(file, p.pub)
	if err != nil {
		return nil, fmt.Errorf("region state: stable revision %s: %w", stable, err)
	}
	p.rs.cfgMu.Lock()
	p.rs.cfgID, p.rs.cfg = stable, snap.Config
	p.rs.cfgMu.Unlock()
	return snap.Config, nil
}

// WatchRegionState answers a node's long-poll of the region state: the
// signed document when its version is above the one the node has, at once
// or as soon as one is; nil when the wait ends without one. Only the
// leader composes; a follower's polls wait out their timeout.
func (p *Plane) WatchRegionState(ctx context.Context, have envelope.Version, q model.WatchQuery) (envelope.Version, []byte, error) {
	timer := time.NewTimer(p.timeout(q))
	defer timer.Stop()
	for {
		wake := p.hub.wait()
		p.rs.mu.Lock()
		cur := p.rs.cur
		p.rs.mu.Unlock()
		if cur != nil && have.Less(cur.version) {
			return cur.version, cur.file, nil
		}
		select {
		case <-wake:
		case <-timer.C:
			return envelope.Version{}, nil, nil
		case <-ctx.Done():
			return envelope.Version{}, nil, ctx.Err()
		}
	}
}

// RegionState is the last document composed here (nil before the first or
// on a follower).
func (p *Plane) RegionState() (*regionstate.State, []byte) {
	p.rs.mu.Lock()
	defer p.rs.mu.Unlock()
	if p.rs.cur == nil {
		return nil, nil
	}
	return p.rs.cur.state, p.rs.cur.file
}
