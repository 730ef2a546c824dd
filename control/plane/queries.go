package plane

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/revision"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Revisions lists up to limit revisions, newest first, older than
// sequence before (0: from the newest).
func (p *Plane) Revisions(ctx context.Context, before uint64, limit int) ([]*model.Revision, error) {
	var out []*model.Revision
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.Revisions(ctx, before, limit)
		return err
	})
	return out, err
}

// RevisionDetail is a revision with its config and rollout.
type RevisionDetail struct {
	*model.Revision
	Rollout *model.Rollout  `json:"rollout,omitempty"`
	Config  json.RawMessage `json:"config,omitempty"` // canonical, when asked for
}

// Revision returns a revision, its rollout and, with config, its
// canonical config.
func (p *Plane) Revision(ctx context.Context, id string, config bool) (*RevisionDetail, error) {
	d := &RevisionDetail{}
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		if d.Revision, err = tx.Revision(ctx, id); err != nil {
			return fmt.Errorf("revision %s: %w", id, err)
		}
		if d.Rollout, err = tx.Rollout(ctx, id); err != nil {
			return err
		}
		if config {
			file, err := tx.Snapshot(ctx, id)
			if err != nil {
				return err
			}
			s, err := snapshot.Parse(file, p.pub)
			if err != nil {
				return err
			}
			d.Config = s.Canonical
		}
		return nil
	})
	return d, err
}

// Snapshot returns a revision's signed snapshot file.
func (p *Plane) Snapshot(ctx context.Context, id string) ([]byte, error) {
	if _, err := model.ParseRevisionID(id); err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return p.snapshotFile(ctx, id)
}

// Diff compares two revisions' configs.
func (p *Plane) Diff(ctx context.Context, from, to string) (*model.Diff, error) {
	var a, b *snapshot.Config
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		if a, err = p.configOf(ctx, tx, from); err != nil {
			return err
		}
		b, err = p.configOf(ctx, tx, to)
		return err
	})
	if err != nil {
		return nil, err
	}
	d := revision.Diff(a, b)
	d.From, d.To = from, to
	return &d, nil
}

// RolloutStatus is a rollout as the API shows it: the record, and for a
// pending rollout that waits for another one to finish (one rollout
// stages at a time), which one.
type RolloutStatus struct {
	*model.Rollout
	// QueuedBehind is the staging revision a pending rollout waits for;
	// when it ends, the newest pending rollout starts and older pending
	// ones are superseded.
	QueuedBehind string `json:"queued_behind,omitempty"`
}

// Rollouts lists up to limit rollouts, newest first (open: only pending
// and staging ones, oldest first).
func (p *Plane) Rollouts(ctx context.Context, open bool, limit int) ([]*RolloutStatus, error) {
	var out []*RolloutStatus
	err := p.st.View(ctx, func(tx store.Tx) error {
		ros, err := tx.Rollouts(ctx, open, limit)
		if err != nil {
			return err
		}
		staging, err := stagingRevision(ctx, tx)
		for _, ro := range ros {
			out = append(out, queued(ro, staging))
		}
		return err
	})
	return out, err
}

// Rollout returns the rollout of a revision.
func (p *Plane) Rollout(ctx context.Context, id string) (*RolloutStatus, error) {
	var out *RolloutStatus
	err := p.st.View(ctx, func(tx store.Tx) error {
		ro, err := tx.Rollout(ctx, id)
		if err != nil {
			return err
		}
		staging, err := stagingRevision(ctx, tx)
		out = queued(ro, staging)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rollout %s: %w", id, err)
	}
	return out, nil
}

// stagingRevision is the revision of the staging rollout, or "".
func stagingRevision(ctx context.Context, tx store.Tx) (string, error) {
	open, err := tx.Rollouts(ctx, true, 1000)
	for _, o := range open {
		if o.State == model.StateStaging {
			return o.Revision, err
		}
	}
	return "", err
}

func queued(ro *model.Rollout, staging string) *RolloutStatus {
	rs := &RolloutStatus{Rollout: ro}
	if ro.State == model.StatePending && staging != "" && staging != ro.Revision {
		rs.QueuedBehind = staging
	}
	return rs
}

// FleetView is every node with what it runs and what it should run.
type FleetView struct {
	Leader        store.Leadership `json:"leader"`
	Stable        string           `json:"stable,omitempty"`
	StableVersion snapshot.Version `json:"stable_version"`
	Rolling       string           `json:"rolling,omitempty"` // the staging revision, if a stage is open
	Nodes         []FleetNode      `json:"nodes"`
}

// FleetNode is one node in the fleet view.
type FleetNode struct {
	model.Node
	Stage           string           `json:"stage,omitempty"` // the rollout stage it belongs to
	Assigned        string           `json:"assigned,omitempty"`
	AssignedVersion snapshot.Version `json:"assigned_version"`
	Live            bool             `json:"live"`      // reported within the node timeout
	Converged       bool             `json:"converged"` // active == assigned
	AgeSeconds      float64          `json:"last_seen_seconds_ago"`
}

// Fleet returns the fleet view.
func (p *Plane) Fleet(ctx context.Context) (*FleetView, error) {
	nodes, err := p.st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	v := p.view.Load()
	fv := &FleetView{Leader: p.st.Leader(), Nodes: []FleetNode{}}
	if v.stable != nil {
		fv.Stable, fv.StableVersion = v.stable.ID, v.stable.Version
	}
	if v.rolling != nil {
		fv.Rolling = v.rolling.Revision
	}
	now := time.Now()
	for _, n := range nodes {
		fn := FleetNode{Node: n, Live: now.Sub(n.SeenAt) <= p.o.Policy.NodeTimeout, AgeSeconds: now.Sub(n.SeenAt).Seconds()}
		if s := p.o.Policy.StageOf(n.Identity); s >= 0 {
			fn.Stage = p.o.Policy.Stages[s].Name
		}
		fn.Assigned, fn.AssignedVersion = p.assign(v, n.Identity)
		fn.Converged = fn.Assigned != "" && n.Active == fn.AssignedVersion
		fv.Nodes = append(fv.Nodes, fn)
	}
	return fv, nil
}
