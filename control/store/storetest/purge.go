package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// purgeState checks the purge channel's record: zero before any, kept as
// written (rules and file), replaced whole, refused in a read-only
// transaction, and never at a lower sequence.
func purgeState(t *testing.T, s store.Store) {
	ctx := context.Background()
	err := s.View(ctx, func(tx store.Tx) error {
		p, err := tx.Purge(ctx)
		if err != nil || p.Sequence != 0 || len(p.Rules) != 0 || len(p.File) != 0 {
			t.Errorf("empty Purge = %+v, %v", p, err)
		}
		if err := tx.PutPurge(ctx, &model.PurgeState{Sequence: 1}); err == nil {
			t.Error("PutPurge in a read-only transaction succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	want := &model.PurgeState{Sequence: 3, UpdatedAt: now, File: []byte("purge-file-3"), Rules: []model.PurgeRule{
		{ID: 2, At: now, Route: "pages", By: "ops"},
		{ID: 3, At: now, Prefix: "example.com/blog/", SurrogateKey: "post-1"},
	}}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutPurge(ctx, want) }); err != nil {
		t.Fatalf("PutPurge: %v", err)
	}
	read := func() *model.PurgeState {
		var p *model.PurgeState
		if err := s.View(ctx, func(tx store.Tx) error {
			var err error
			p, err = tx.Purge(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got := read()
	if got.Sequence != 3 || string(got.File) != "purge-file-3" || !got.UpdatedAt.Equal(now) || len(got.Rules) != 2 ||
		got.Rules[0].Route != "pages" || got.Rules[0].By != "ops" || !got.Rules[0].At.Equal(now) ||
		got.Rules[1].Prefix != "example.com/blog/" || got.Rules[1].SurrogateKey != "post-1" {
		t.Errorf("Purge = %+v, want %+v", got, want)
	}
	// A lower sequence is refused and changes nothing.
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutPurge(ctx, &model.PurgeState{Sequence: 2, File: []byte("older")})
	}); err == nil {
		t.Error("PutPurge with a lower sequence succeeded")
	}
	if got := read(); got.Sequence != 3 || string(got.File) != "purge-file-3" {
		t.Errorf("after a refused write: %+v", got)
	}
	// A later write replaces the record whole.
	if err := s.Update(ctx, func(tx store.Tx) error {
		return tx.PutPurge(ctx, &model.PurgeState{Sequence: 4, File: []byte("purge-file-4"), Rules: []model.PurgeRule{{ID: 4, At: now, Route: "r"}}})
	}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Sequence != 4 || string(got.File) != "purge-file-4" || len(got.Rules) != 1 || got.Rules[0].ID != 4 {
		t.Errorf("Purge after replace = %+v", got)
	}
}
