// Package storetest checks that a store.Store keeps the contract the
// control plane relies on; both stores run it.
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// WaitLeader waits until s holds the write lease.
func WaitLeader(t testing.TB, s store.Store, within time.Duration) store.Leadership {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if l := s.Leader(); l.Leader {
			return l
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("store did not become leader within %s: %+v", within, s.Leader())
	return store.Leadership{}
}

// Run checks s, which must be empty and leading (or about to).
func Run(t *testing.T, s store.Store) {
	ctx := context.Background()
	lead := WaitLeader(t, s, 10*time.Second)
	var mu sync.Mutex
	var got []model.Event
	s.Subscribe(func(e model.Event) { mu.Lock(); got = append(got, e); mu.Unlock() })

	// A failed transaction leaves nothing behind and publishes nothing.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.NextSequence(ctx); err != nil {
			return err
		}
		if err := tx.Emit(ctx, model.EventRevision, "r1"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update error = %v, want boom", err)
	}
	var ids []string
	for i := 0; i < 3; i++ {
		err := s.Update(ctx, func(tx store.Tx) error {
			if tx.Epoch() != lead.Epoch {
				t.Errorf("tx epoch %d, lease epoch %d", tx.Epoch(), lead.Epoch)
			}
			seq, err := tx.NextSequence(ctx)
			if err != nil {
				return err
			}
			r := &model.Revision{ID: model.RevisionID(seq), Version: snapshot.Version{Epoch: tx.Epoch(), Sequence: seq}, Kind: model.KindSubmitted,
				IdempotencyKey: map[int]string{0: "k0", 2: "k2"}[i], CreatedAt: time.Now().UTC()}
			ids = append(ids, r.ID)
			if err := tx.PutRevision(ctx, r, []byte("snap-"+r.ID)); err != nil {
				return err
			}
			if err := tx.PutRollout(ctx, &model.Rollout{Revision: r.ID, Version: r.Version, State: model.StatePending, Stage: -1}); err != nil {
				return err
			}
			return tx.Emit(ctx, model.EventRevision, r.ID)
		})
		if err != nil {
			t.Fatalf("put revision %d: %v", i, err)
		}
	}
	if ids[0] != "r1" && ids[0] != "r2" {
		t.Logf("first id %s (a failed transaction may or may not give its sequence back)", ids[0])
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.PutRevision(ctx, &model.Revision{ID: "r999", IdempotencyKey: "k0"}, []byte("x"))
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate idempotency key: err = %v, want ErrConflict", err)
	}
	err = s.View(ctx, func(tx store.Tx) error {
		if err := tx.PutFleet(ctx, &model.Fleet{}); err == nil {
			t.Error("PutFleet in a read-only transaction succeeded")
		}
		r, err := tx.RevisionByKey(ctx, "k2")
		if err != nil || r.ID != ids[2] {
			t.Errorf("RevisionByKey(k2) = %v, %v; want %s", r, err, ids[2])
		}
		if _, err := tx.RevisionByKey(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevisionByKey(nope) err = %v", err)
		}
		if _, err := tx.Revision(ctx, "bogus"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Revision(bogus) err = %v", err)
		}
		snap, err := tx.Snapshot(ctx, ids[1])
		if err != nil || string(snap) != "snap-"+ids[1] {
			t.Errorf("Snapshot = %q, %v", snap, err)
		}
		all, err := tx.Revisions(ctx, 0, 10)
		if err != nil || len(all) != 3 || all[0].ID != ids[2] || all[2].ID != ids[0] {
			t.Errorf("Revisions newest first = %v, %v", revIDs(all), err)
		}
		seq1, _ := model.ParseRevisionID(ids[1])
		older, err := tx.Revisions(ctx, seq1, 10)
		if err != nil || len(older) != 1 || older[0].ID != ids[0] {
			t.Errorf("Revisions before %s = %v, %v", ids[1], revIDs(older), err)
		}
		f, err := tx.Fleet(ctx)
		if err != nil || f.Stable != "" {
			t.Errorf("empty Fleet = %+v, %v", f, err)
		}
		d, err := tx.Deny(ctx)
		if err != nil || d.Sequence != 0 || len(d.File) != 0 {
			t.Errorf("empty Deny = %+v, %v", d, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Rollouts: open ones oldest first; closing one drops it from the open list.
	err = s.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Rollout(ctx, ids[0])
		if err != nil {
			return err
		}
		r.State = model.StateDone
		if err := tx.PutRollout(ctx, r); err != nil {
			return err
		}
		if err := tx.PutFleet(ctx, &model.Fleet{Stable: ids[0], StableVersion: r.Version}); err != nil {
			return err
		}
		return tx.PutDeny(ctx, &model.DenyState{Sequence: 7, Entries: []model.DenyEntry{{Kind: "jti", Value: "x"}}, File: []byte("deny-file")})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(ctx, func(tx store.Tx) error {
		open, err := tx.Rollouts(ctx, true, 10)
		if err != nil || len(open) != 2 || open[0].Revision != ids[1] || open[1].Revision != ids[2] {
			t.Errorf("open rollouts = %v, %v; want [%s %s]", roIDs(open), err, ids[1], ids[2])
		}
		all, err := tx.Rollouts(ctx, false, 10)
		if err != nil || len(all) != 3 || all[0].Revision != ids[2] {
			t.Errorf("all rollouts = %v, %v", roIDs(all), err)
		}
		f, _ := tx.Fleet(ctx)
		d, _ := tx.Deny(ctx)
		if f.Stable != ids[0] || d.Sequence != 7 || string(d.File) != "deny-file" || len(d.Entries) != 1 {
			t.Errorf("fleet %+v deny %+v", f, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nodes are unfenced upserts.
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, id := range []string{"n2", "n1", "n2"} {
		n := &model.Node{Status: model.Status{Identity: model.Identity{NodeID: id, Zone: "z"}, Ready: true}, SeenAt: now}
		if err := s.PutNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	nodes, err := s.Nodes(ctx)
	if err != nil || len(nodes) != 2 || nodes[0].NodeID != "n1" || !nodes[1].SeenAt.Equal(now) {
		t.Fatalf("Nodes = %+v, %v", nodes, err)
	}
	credentials(t, s)
	regionControl(t, s)
	purgeState(t, s)
	serialWrites(t, s)
	// Events: the three committed ones, in order, none of the failed transaction.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("events published = %+v, want 3", got)
	}
	for i, e := range got {
		if e.Subject != ids[i] || e.Kind != model.EventRevision || e.Epoch != lead.Epoch || (i > 0 && e.ID <= got[i-1].ID) {
			t.Errorf("event %d = %+v", i, e)
		}
	}
}

func revIDs(rs []*model.Revision) (out []string) {
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func roIDs(rs []*model.Rollout) (out []string) {
	for _, r := range rs {
		out = append(out, r.Revision)
	}
	return out
}
