package boltstore_test

import (
	"context"
	"testing"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/control/store/boltstore"
	"github.com/rampart-edge/rampart/control/store/storetest"
)

func TestContract(t *testing.T) {
	s, err := boltstore.Open(t.TempDir(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Run(t, s)
}

// Each open takes the next epoch, so versions published after a restart
// sort after the ones before; the data stays.
func TestReopenIncrementsEpoch(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := boltstore.Open(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	e1 := s.Leader().Epoch
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutFleet(ctx, &model.Fleet{Stable: "r1"})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := boltstore.Open(dir, "b"); err == nil {
		t.Fatal("a second open of the same file succeeded")
	}
	s.Close()
	if err := s.Update(ctx, func(store.Tx) error { return nil }); err != store.ErrNotLeader {
		t.Fatalf("update after close: %v, want ErrNotLeader", err)
	}
	s2, err := boltstore.Open(dir, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if e2 := s2.Leader().Epoch; e2 != e1+1 {
		t.Fatalf("epoch after reopen = %d, want %d", e2, e1+1)
	}
	_ = s2.View(ctx, func(tx store.Tx) error {
		if f, _ := tx.Fleet(ctx); f.Stable != "r1" {
			t.Errorf("fleet after reopen = %+v", f)
		}
		return nil
	})
}
