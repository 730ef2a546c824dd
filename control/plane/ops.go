package plane

import (
	"context"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// Pause stops a pending or staging rollout where it is: no stage opens or
// passes until Resume. The health gate keeps watching the nodes already on
// the revision, and still fails it if they do worse.
func (p *Plane) Pause(ctx context.Context, id, reason string) (*model.Rollout, error) {
	if reason == "" {
		reason = "paused by an operator"
	}
	if err := checkText("reason", reason, MaxMessageBytes); err != nil {
		return nil, err
	}
	return p.change(ctx, id, func(ro *model.Rollout) error {
		ro.Paused, ro.PauseReason = true, reason
		return nil
	})
}

// Resume lets a paused rollout go on (approving it, after a shadow check
// that paused it); the clock of the current wait or bake starts again.
func (p *Plane) Resume(ctx context.Context, id string) (*model.Rollout, error) {
	return p.change(ctx, id, func(ro *model.Rollout) error {
		ro.Paused, ro.PauseReason = false, ""
		if ro.State == model.StateStaging {
			ro.PhaseSince = time.Now().UTC()
		}
		return nil
	})
}

// Abort stops a rollout for good. Nodes that got the revision return to
// the baseline's config, published again under a new version.
func (p *Plane) Abort(ctx context.Context, id, reason string) (*model.Rollout, error) {
	if reason == "" {
		reason = "aborted by an operator"
	}
	if err := checkText("reason", reason, MaxMessageBytes); err != nil {
		return nil, err
	}
	var out *model.Rollout
	err := p.update(ctx, func(tx store.Tx) error {
		ro, err := p.openRollout(ctx, tx, id)
		if err != nil {
			return err
		}
		ro.State, ro.Reason = model.StateAborted, reason
		out = ro
		return p.finish(ctx, tx, ro)
	})
	p.wakeEngine()
	return out, err
}

func (p *Plane) openRollout(ctx context.Context, tx store.Tx, id string) (*model.Rollout, error) {
	ro, err := tx.Rollout(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("rollout %s: %w", id, err)
	}
	if !ro.Open() {
		return nil, fmt.Errorf("%w: rollout %s is %s", store.ErrConflict, id, ro.State)
	}
	return ro, nil
}

func (p *Plane) change(ctx context.Context, id string, fn func(*model.Rollout) error) (*model.Rollout, error) {
	var out *model.Rollout
	err := p.update(ctx, func(tx store.Tx) error {
		ro, err := p.openRollout(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := fn(ro); err != nil {
			return err
		}
		ro.UpdatedAt = time.Now().UTC()
		out = ro
		return p.putRollout(ctx, tx, ro)
	})
	p.wakeEngine()
	return out, err
}

// Rollback publishes revision to's config again under a new version
// (nodes refuse older versions, so going back is going forward). Every
// open rollout is closed: pending ones are superseded, a staging one is
// aborted. Unstaged, the new revision is made stable at once, for every
// node; staged, it goes through the stages like any other revision (the
// aborted rollout's nodes first return to its baseline).
func (p *Plane) Rollback(ctx context.Context, to string, staged bool, message string) (*model.Revision, error) {
	if err := checkText("message", message, MaxMessageBytes); err != nil {
		return nil, err
	}
	var rev *model.Revision
	err := p.update(ctx, func(tx store.Tx) error {
		if _, err := tx.Revision(ctx, to); err != nil {
			return fmt.Errorf("revision %s: %w", to, err)
		}
		now := time.Now().UTC()
		open, err := tx.Rollouts(ctx, true, 1000)
		if err != nil {
			return err
		}
		for _, ro := range open {
			ro.Reason, ro.UpdatedAt = "rollback to "+to, now
			switch {
			case ro.State == model.StatePending:
				ro.State = model.StateSuperseded
				err = p.putRollout(ctx, tx, ro)
			case staged: // its nodes return to its baseline first
				ro.State = model.StateAborted
				err = p.finish(ctx, tx, ro)
			default: // the new stable revision replaces it everywhere
				ro.State, ro.Phase = model.StateAborted, ""
				err = p.putRollout(ctx, tx, ro)
			}
			if err != nil {
				return err
			}
		}
		if message == "" {
			message = "rollback to " + to
		}
		if rev, err = p.republish(ctx, tx, to, model.KindRollback, message); err != nil {
			return err
		}
		ro := &model.Rollout{Revision: rev.ID, Version: rev.Version, State: model.StatePending, Stage: -1, CreatedAt: now, UpdatedAt: now}
		if !staged {
			ro.State, ro.Reason = model.StateDone, "rollback to "+to+": published to every node at once"
			if err := p.setStable(ctx, tx, rev.ID, rev.Version); err != nil {
				return err
			}
		}
		if err := p.putRollout(ctx, tx, ro); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventRevision, rev.ID)
	})
	p.wakeEngine()
	return rev, err
}
