package plane

import (
	"context"
	"fmt"
	"sync"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// view is what node long-polls are answered from: immutable, replaced on
// every change.
type view struct {
	stable  *model.Revision // nil before the first
	rolling *model.Rollout  // a staging rollout with a stage open, or nil
	deny    *model.DenyState
	purge   *model.PurgeState // purge.go
}

// assign is the revision (and its version) a node should run: the
// rolling one if the node's stage is open, else the stable one; "" if
// there is none yet.
func (p *Plane) assign(v *view, id model.Identity) (string, snapshot.Version) {
	if r := v.rolling; r != nil && p.o.Policy.Gets(id, r.Stage) {
		return r.Revision, r.Version
	}
	if v.stable != nil {
		return v.stable.ID, v.stable.Version
	}
	return "", snapshot.Version{}
}

// reload re-reads the view from the store and wakes every long-poll.
func (p *Plane) reload(ctx context.Context) error {
	nv := &view{}
	err := p.st.View(ctx, func(tx store.Tx) error {
		f, err := tx.Fleet(ctx)
		if err != nil {
			return err
		}
		if f.Stable != "" {
			if nv.stable, err = tx.Revision(ctx, f.Stable); err != nil {
				return fmt.Errorf("stable revision %s: %w", f.Stable, err)
			}
		}
		open, err := tx.Rollouts(ctx, true, 1000)
		if err != nil {
			return err
		}
		for _, r := range open {
			if r.State == model.StateStaging && r.Stage >= 0 {
				nv.rolling = r
			}
		}
		if nv.deny, err = tx.Deny(ctx); err != nil {
			return err
		}
		nv.purge, err = tx.Purge(ctx)
		return err
	})
	if err != nil {
		return err
	}
	p.view.Store(nv)
	p.hub.broadcast()
	return nil
}

// snapshotFile returns a revision's signed file, cached.
func (p *Plane) snapshotFile(ctx context.Context, id string) ([]byte, error) {
	p.cacheMu.Lock()
	f, ok := p.files[id]
	p.cacheMu.Unlock()
	if ok {
		return f, nil
	}
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		f, err = tx.Snapshot(ctx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	p.cacheMu.Lock()
	if len(p.files) >= 8 {
		for k := range p.files { // drop any one: the next miss refills it
			delete(p.files, k)
			break
		}
	}
	p.files[id] = f
	p.cacheMu.Unlock()
	return f, nil
}

// hub wakes every waiter at once: wait returns a channel that broadcast
// closes.
type hub struct {
	mu sync.Mutex
	ch chan struct{}
}

func (h *hub) init() { h.ch = make(chan struct{}) }

func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

func (h *hub) broadcast() {
	h.mu.Lock()
	close(h.ch)
	h.ch = make(chan struct{})
	h.mu.Unlock()
}
