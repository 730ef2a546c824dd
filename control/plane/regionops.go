package plane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// LagSkew is how far in the future a pushed observation time may be (the
// monitor's clock ahead of ours); later ones are refused.
const LagSkew = 2 * time.Second

// MaxReasonBytes bounds a drain's reason.
const MaxReasonBytes = 256

// regionControl reads the stored drains and writers in a read transaction.
func (p *Plane) regionControl(ctx context.Context) (*model.RegionControl, error) {
	var rc *model.RegionControl
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		rc, err = tx.RegionControl(ctx)
		return err
	})
	return rc, err
}

// Regions is every region's health as of the last composition (the
// leader's), with drains.
func (p *Plane) Regions(ctx context.Context) ([]model.RegionHealth, error) {
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return nil, err
	}
	nodes, err := p.st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	rc, err := p.regionControl(ctx)
	if err != nil {
		return nil, err
	}
	hs := withConfigRegions(judgeRegions(p.o.Regions, nodes, time.Now()), cfg, p.o.Regions)
	for i := range hs {
		if d := drainOf(rc, hs[i].Name); d != nil {
			hs[i].Draining, hs[i].DrainReason = true, d.Reason
		}
	}
	return hs, nil
}

// Platforms is every platform of the config with its writer and the lags
// pushed to this instance.
func (p *Plane) Platforms(ctx context.Context) ([]model.PlatformState, error) {
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return nil, err
	}
	rc, err := p.regionControl(ctx)
	if err != nil {
		return nil, err
	}
	out := []model.PlatformState{}
	if cfg == nil {
		return out, nil
	}
	p.rs.lagMu.Lock()
	defer p.rs.lagMu.Unlock()
	for _, pl := range cfg.Platforms {
		ps := model.PlatformState{Name: pl.Name, Replicas: pl.ReplicaRegions}
		if w := writerOf(rc, pl.Name); w != nil {
			ps.Writer, ps.WriterEpoch, ps.SwitchedAt = w.Region, w.Epoch, w.SwitchedAt
		}
		for k, l := range p.rs.lags {
			if k[0] == pl.Name {
				ps.Lags = append(ps.Lags, l)
			}
		}
		slices.SortFunc(ps.Lags, func(a, b model.ReplicaLag) int { return strings.Compare(a.Region, b.Region) })
		out = append(out, ps)
	}
	return out, nil
}

// PushLag records a monitor's replica lags of one platform. The latest per
// (platform, region) is kept in this instance's memory, and only the
// leader takes pushes (it composes the document): a lag is a signal that
// the monitor sends again, not configuration. Refused: no config yet, an
// unknown platform or region, a region listed twice, an observation time
// missing or more than LagSkew ahead of this clock.
func (p *Plane) PushLag(ctx context.Context, platform string, lags []model.ReplicaLag) error {
	if !p.st.Leader().Leader {
		return store.ErrNotLeader
	}
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return err
	}
	pl, err := platformOf(cfg, platform)
	if err != nil {
		return err
	}
	if len(lags) == 0 {
		return badRequest("no lags")
	}
	now := time.Now()
	seen := map[string]bool{}
	for i, l := range lags {
		if !hasRegion(cfg, l.Region) {
			return badRequest("lags[%d]: region %q is not a region of the config (%s)", i, l.Region, regionNames(cfg))
		}
		if seen[l.Region] {
			return badRequest("lags[%d]: region %q listed twice", i, l.Region)
		}
		seen[l.Region] = true
		if l.ObservedAt.IsZero() {
			return badRequest("lags[%d] (%s): observed_at is required", i, l.Region)
		}
		if l.ObservedAt.After(now.Add(LagSkew)) {
			return badRequest("lags[%d] (%s): observed_at %s is %s ahead of the control plane's clock (more than %s)", i, l.Region, l.ObservedAt.UTC().Format(time.RFC3339Nano), l.ObservedAt.Sub(now).Round(time.Millisecond), LagSkew)
		}
		if l.ObservedAt.Year() < 2000 {
			return badRequest("lags[%d] (%s): observed_at %s is before 2000", i, l.Region, l.ObservedAt.UTC().Format(time.RFC3339))
		}
	}
	p.rs.lagMu.Lock()
	if p.rs.lags == nil {
		p.rs.lags = map[[2]string]model.ReplicaLag{}
	}
	for _, l := range lags {
		k := [2]string{pl.Name, l.Region}
		if old, ok := p.rs.lags[k]; ok && old.ObservedAt.After(l.ObservedAt) {
			continue // an older observation than the one we have
		}
		l.ObservedAt, l.PushedAt = l.ObservedAt.UTC(), now.UTC()
		p.rs.lags[k] = l
	}
	p.rs.lagMu.Unlock()
	p.RegionStateChanged()
	return nil
}

// SetWriter switches a platform's writer region (an explicit primary
// switch): the fencing epoch goes up by one. With expected set, the switch
// is a compare-and-set: it is refused (ErrConflict) unless the current
// epoch is *expected (0: no writer yet). The change is stored through the
// fenced write path with an event.
func (p *Plane) SetWriter(ctx context.Context, platform, region string, expected *uint64, by string) (*model.PlatformWriter, error) {
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return nil, err
	}
	pl, err := platformOf(cfg, platform)
	if err != nil {
		return nil, err
	}
	if !hasRegion(cfg, region) {
		return nil, badRequest("region %q is not a region of the config (%s)", region, regionNames(cfg))
	}
	if len(pl.ReplicaRegions) > 0 && !slices.Contains(pl.ReplicaRegions, region) {
		return nil, badRequest("region %q holds no replica of platform %q (replica_regions %v)", region, platform, pl.ReplicaRegions)
	}
	var out model.PlatformWriter
	err = p.update(ctx, func(tx store.Tx) error {
		rc, err := tx.RegionControl(ctx)
		if err != nil {
			return err
		}
		var cur uint64
		i := slices.IndexFunc(rc.Writers, func(w model.PlatformWriter) bool { return w.Platform == platform })
		if i >= 0 {
			cur = rc.Writers[i].Epoch
		}
		if expected != nil && *expected != cur {
			return fmt.Errorf("writer of platform %q: expected epoch %d, the current one is %d: %w", platform, *expected, cur, store.ErrConflict)
		}
		now := time.Now().UTC()
		out = model.PlatformWriter{Platform: platform, Region: region, Epoch: cur + 1, By: by, SwitchedAt: now}
		if i >= 0 {
			rc.Writers[i] = out
		} else {
			rc.Writers = append(rc.Writers, out)
			slices.SortFunc(rc.Writers, func(a, b model.PlatformWriter) int { return strings.Compare(a.Platform, b.Platform) })
		}
		rc.UpdatedAt = now
		if err := tx.PutRegionControl(ctx, rc); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventWriter, fmt.Sprintf("%s=%s@%d", platform, region, out.Epoch))
	})
	if err != nil {
		return nil, err
	}
	p.log.Info("platform writer switched", "platform", platform, "region", region, "epoch", out.Epoch, "by", by)
	p.RegionStateChanged()
	return &out, nil
}

// DrainRegion marks a region draining in the document (stored, with an
// event) until UndrainRegion; draining again replaces the reason.
func (p *Plane) DrainRegion(ctx context.Context, region, reason, by string) (*model.RegionDrain, error) {
	if err := p.knownRegion(ctx, region); err != nil {
		return nil, err
	}
	if err := checkText("reason", reason, MaxReasonBytes); err != nil {
		return nil, err
	}
	var out model.RegionDrain
	err := p.update(ctx, func(tx store.Tx) error {
		rc, err := tx.RegionControl(ctx)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		out = model.RegionDrain{Region: region, Reason: reason, By: by, Since: now}
		if i := slices.IndexFunc(rc.Drains, func(d model.RegionDrain) bool { return d.Region == region }); i >= 0 {
			out.Since = rc.Drains[i].Since
			rc.Drains[i] = out
		} else {
			rc.Drains = append(rc.Drains, out)
			slices.SortFunc(rc.Drains, func(a, b model.RegionDrain) int { return strings.Compare(a.Region, b.Region) })
		}
		rc.UpdatedAt = now
		if err := tx.PutRegionControl(ctx, rc); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventRegionDrain, region)
	})
	if err != nil {
		return nil, err
	}
	p.log.Info("region drained", "region", region, "reason", reason, "by", by)
	p.RegionStateChanged()
	return &out, nil
}

// UndrainRegion ends a region's drain (ErrNotFound when it is not drained).
func (p *Plane) UndrainRegion(ctx context.Context, region, by string) error {
	err := p.update(ctx, func(tx store.Tx) error {
		rc, err := tx.RegionControl(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(rc.Drains, func(d model.RegionDrain) bool { return d.Region == region })
		if i < 0 {
			return fmt.Errorf("drain of region %q: %w", region, store.ErrNotFound)
		}
		rc.Drains = slices.Delete(rc.Drains, i, i+1)
		rc.UpdatedAt = time.Now().UTC()
		if err := tx.PutRegionControl(ctx, rc); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventRegionDrain, region)
	})
	if err != nil {
		return err
	}
	p.log.Info("region undrained", "region", region, "by", by)
	p.RegionStateChanged()
	return nil
}

// knownRegion: a region of the config, or one a node reported.
func (p *Plane) knownRegion(ctx context.Context, region string) error {
	cfg, err := p.currentConfig(ctx)
	if err != nil {
		return err
	}
	if hasRegion(cfg, region) {
		return nil
	}
	nodes, err := p.st.Nodes(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(nodes, func(n model.Node) bool { return n.Region == region }) {
		return nil
	}
	return badRequest("region %q is neither a region of the config (%s) nor one a node reported", region, regionNames(cfg))
}

func platformOf(cfg *snapshot.Config, name string) (*snapshot.Platform, error) {
	if cfg == nil {
		return nil, badRequest("no revision is stable yet: platforms come from its config")
	}
	for i := range cfg.Platforms {
		if cfg.Platforms[i].Name == name {
			return &cfg.Platforms[i], nil
		}
	}
	names := make([]string, len(cfg.Platforms))
	for i, pl := range cfg.Platforms {
		names[i] = pl.Name
	}
	return nil, badRequest("platform %q is not a platform of the config (%s)", name, strings.Join(names, ", "))
}

func hasRegion(cfg *snapshot.Config, name string) bool {
	return cfg != nil && slices.ContainsFunc(cfg.Regions, func(r snapshot.RegionDef) bool { return r.Name == name })
}

func regionNames(cfg *snapshot.Config) string {
	if cfg == nil || len(cfg.Regions) == 0 {
		return "it lists none"
	}
	names := make([]string, len(cfg.Regions))
	for i, r := range cfg.Regions {
		names[i] = r.Name
	}
	return "regions " + strings.Join(names, ", ")
}

func drainOf(rc *model.RegionControl, region string) *model.RegionDrain {
	for i := range rc.Drains {
		if rc.Drains[i].Region == region {
			return &rc.Drains[i]
		}
	}
	return nil
}

func writerOf(rc *model.RegionControl, platform string) *model.PlatformWriter {
	for i := range rc.Writers {
		if rc.Writers[i].Platform == platform {
			return &rc.Writers[i]
		}
	}
	return nil
}
