package plane

import (
	"context"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/rollout"
	"github.com/rampart-edge/rampart/control/shadow"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Step moves the open rollout on by one decision: it starts the newest
// pending rollout when none is staging (shadow check first), or advances
// the staging one (rollout.Policy.Advance) and applies the outcome. Only
// the lease holder steps (others get store.ErrNotLeader).
func (p *Plane) Step(ctx context.Context) error {
	_, err := p.step(ctx)
	return err
}

// maxSteps bounds the steps one wake-up takes in a row.
const maxSteps = 16

// steps steps the engine until a step decides nothing (a rollout
// started, a stage opened, a phase or the state changed: look again at
// once), so an event moves a rollout as far as it can go right away.
func (p *Plane) steps(ctx context.Context) error {
	for i := 0; i < maxSteps; i++ {
		moved, err := p.step(ctx)
		if err != nil || !moved {
			return err
		}
	}
	return nil
}

// wakeEngine makes the engine step now instead of at its next tick.
func (p *Plane) wakeEngine() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// wakeAt wakes the engine at t (the end of a bake), so a stage passes
// when its bake ends, not at the next tick. Called under engMu.
func (p *Plane) wakeAt(t time.Time) {
	if p.bakeEnd != nil {
		p.bakeEnd.Stop()
	}
	p.bakeEnd = time.AfterFunc(max(time.Until(t), 0), p.wakeEngine)
}

// reportKey is what in a node's report can move a rollout.
type reportKey struct {
	active, refused snapshot.Version
	ready           bool
}

// nodeReported wakes the engine when a node's report can move the
// staging rollout: it changed what the node runs, refused or its
// readiness, and the node now runs or refused the rollout's version, or
// is unready. Reports that say what the last one said wake nothing.
func (p *Plane) nodeReported(s model.Status) {
	k := reportKey{s.Active, s.RefusedVersion, s.Ready}
	if prev, ok := p.seen.Swap(s.NodeID, k); ok && prev.(reportKey) == k {
		return
	}
	r := p.view.Load().rolling
	if r != nil && (s.Active == r.Version || s.RefusedVersion == r.Version || !s.Ready) {
		p.wakeEngine()
	}
}

func (p *Plane) step(ctx context.Context) (bool, error) {
	p.engMu.Lock()
	defer p.engMu.Unlock()
	if !p.st.Leader().Leader {
		return false, store.ErrNotLeader
	}
	var open []*model.Rollout
	var fleet *model.Fleet
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		if open, err = tx.Rollouts(ctx, true, 1000); err != nil {
			return err
		}
		fleet, err = tx.Fleet(ctx)
		return err
	})
	if err != nil || len(open) == 0 {
		return false, err
	}
	nodes, err := p.st.Nodes(ctx)
	if err != nil {
		return false, err
	}
	for _, ro := range open {
		if ro.State == model.StateStaging {
			return p.advance(ctx, ro.Revision, nodes)
		}
	}
	newest := open[len(open)-1]
	if newest.Paused {
		return false, nil
	}
	return p.start(ctx, newest, fleet, nodes)
}

// start runs the shadow check of a pending rollout against the stable
// revision (outside any transaction: it can take a while), then, if
// nothing moved meanwhile, supersedes older pending rollouts and starts
// staging. A revision whose version is not above every version already
// published (a rollback went out after it was submitted) is published
// again under a new version instead, and that rollout starts next.
func (p *Plane) start(ctx context.Context, ro *model.Rollout, fleet *model.Fleet, nodes []model.Node) (bool, error) {
	var oldCfg, newCfg *snapshot.Config
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		if fleet.Stable != "" {
			if oldCfg, err = p.configOf(ctx, tx, fleet.Stable); err != nil {
				return err
			}
		}
		newCfg, err = p.configOf(ctx, tx, ro.Revision)
		return err
	})
	if err != nil {
		return false, err
	}
	rep, err := shadow.Check(oldCfg, newCfg, fleet.Stable, p.o.Shadow.MaxListed)
	if err != nil {
		return false, err
	}
	now := time.Now().UTC()
	moved := false
	err = p.update(ctx, func(tx store.Tx) error {
		cur, err := tx.Rollout(ctx, ro.Revision)
		if err != nil {
			return err
		}
		f, err := tx.Fleet(ctx)
		if err != nil {
			return err
		}
		if cur.State != model.StatePending || cur.Paused || f.Stable != fleet.Stable {
			return nil // moved meanwhile: the next step looks again
		}
		open, err := tx.Rollouts(ctx, true, 1000)
		if err != nil {
			return err
		}
		for _, o := range open {
			if o.State == model.StatePending && o.Revision != cur.Revision {
				o.State, o.Reason, o.UpdatedAt = model.StateSuperseded, "superseded by "+cur.Revision, now
				if err := p.putRollout(ctx, tx, o); err != nil {
					return err
				}
			}
		}
		if !f.MaxPublished.Less(cur.Version) {
			nr, err := p.republish(ctx, tx, cur.Revision, model.KindRepublish,
				fmt.Sprintf("%s again: version %s is not above %s, already published", cur.Revision, cur.Version, f.MaxPublished))
			if err != nil {
				return err
			}
			cur.State, cur.Reason, cur.UpdatedAt = model.StateSuperseded, "republished as "+nr.ID+" (a newer version went out first)", now
			if err := p.putRollout(ctx, tx, cur); err != nil {
				return err
			}
			moved = true
			return p.putRollout(ctx, tx, &model.Rollout{Revision: nr.ID, Version: nr.Version, State: model.StatePending,
				Stage: -1, CreatedAt: now, UpdatedAt: now})
		}
		live := p.o.Policy.Live(nodes, now)
		cur.State, cur.Baseline, cur.Shadow, cur.Stage, cur.UpdatedAt = model.StateStaging, f.Stable, rep, -1, now
		cur.BaselineErr, cur.BaselineLat = p.o.Policy.Baseline(live)
		if m := p.o.Shadow.MaxUnexpected; m >= 0 && rep.Unexpected > m {
			cur.Paused = true
			cur.PauseReason = fmt.Sprintf("shadow check: %d unexpected differences, over the limit of %d: resume to approve, abort to drop",
				rep.Unexpected, m)
		}
		p.log.Info("rollout started", "revision", cur.Revision, "baseline", cur.Baseline,
			"shadow_differences", rep.Differences, "unexpected", rep.Unexpected, "paused", cur.Paused)
		moved = !cur.Paused
		return p.putRollout(ctx, tx, cur)
	})
	return moved && err == nil, err
}

// advance applies rollout.Policy.Advance to a staging rollout.
func (p *Plane) advance(ctx context.Context, id string, nodes []model.Node) (bool, error) {
	moved := false
	err := p.update(ctx, func(tx store.Tx) error {
		ro, err := tx.Rollout(ctx, id)
		if err != nil || ro.State != model.StateStaging {
			return err
		}
		now := time.Now().UTC()
		stage, phase := ro.Stage, ro.Phase
		out := p.o.Policy.Advance(now, ro, nodes)
		moved = out == rollout.Failed || out == rollout.Completed || ro.Stage != stage || ro.Phase != phase
		switch out {
		case rollout.Unchanged:
			return nil
		case rollout.Failed:
			p.log.Warn("revision failed", "revision", ro.Revision, "reason", ro.Reason)
			return p.finish(ctx, tx, ro)
		case rollout.Completed:
			ro.UpdatedAt = now
			if err := p.setStable(ctx, tx, ro.Revision, ro.Version); err != nil {
				return err
			}
			p.log.Info("rollout done", "revision", ro.Revision)
			return p.putRollout(ctx, tx, ro)
		}
		if ro.Phase == model.PhaseBaking && !ro.Paused {
			p.wakeAt(ro.PhaseSince.Add(p.o.Policy.BakeOf(ro.Stage)))
		}
		if ro.Stage != stage {
			ro.UpdatedAt = now
			if err := p.published(ctx, tx, ro.Version); err != nil {
				return err
			}
			p.log.Info("rollout stage opened", "revision", ro.Revision, "stage", ro.Stages[len(ro.Stages)-1].Name)
			return p.putRollout(ctx, tx, ro)
		}
		return tx.PutRollout(ctx, ro) // health sample or phase: no event
	})
	return moved && err == nil, err
}

// finish closes a failed or aborted rollout: if any stage was open, the
// baseline's config is published again under a new version and made
// stable, so every node that got the revision returns to it (and the
// rest move to an identical config).
func (p *Plane) finish(ctx context.Context, tx store.Tx, ro *model.Rollout) error {
	now := time.Now().UTC()
	ro.Phase, ro.UpdatedAt = "", now
	if ro.Stage >= 0 && ro.Baseline != "" {
		b, err := p.republish(ctx, tx, ro.Baseline, model.KindRollback,
			fmt.Sprintf("return to %s after %s %s: %s", ro.Baseline, ro.Revision, ro.State, ro.Reason))
		if err != nil {
			return err
		}
		ro.RolledBackTo = b.ID
		if err := tx.PutRollout(ctx, &model.Rollout{Revision: b.ID, Version: b.Version, State: model.StateDone, Stage: -1,
			Baseline: ro.Baseline, Reason: "rollback of " + ro.Revision + ": published to every node at once", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		if err := p.setStable(ctx, tx, b.ID, b.Version); err != nil {
			return err
		}
	}
	return p.putRollout(ctx, tx, ro)
}

func (p *Plane) setStable(ctx context.Context, tx store.Tx, id string, v snapshot.Version) error {
	f, err := tx.Fleet(ctx)
	if err != nil {
		return err
	}
	f.Stable, f.StableVersion, f.UpdatedAt = id, v, time.Now().UTC()
	if f.MaxPublished.Less(v) {
		f.MaxPublished = v
	}
	if err := tx.PutFleet(ctx, f); err != nil {
		return err
	}
	return tx.Emit(ctx, model.EventFleet, id)
}

// published records that version v went out to nodes.
func (p *Plane) published(ctx context.Context, tx store.Tx, v snapshot.Version) error {
	f, err := tx.Fleet(ctx)
	if err != nil || !f.MaxPublished.Less(v) {
		return err
	}
	f.MaxPublished, f.UpdatedAt = v, time.Now().UTC()
	return tx.PutFleet(ctx, f)
}

func (p *Plane) putRollout(ctx context.Context, tx store.Tx, ro *model.Rollout) error {
	if err := tx.PutRollout(ctx, ro); err != nil {
		return err
	}
	return tx.Emit(ctx, model.EventRollout, ro.Revision)
}
