package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// credentials checks node credentials: enrol, look up by token hash,
// rotate (the old hash stops matching in the same transaction), a hash
// taken by another id is a conflict, revoke keeps the record.
func credentials(t *testing.T, s store.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	put := func(c *model.NodeCredential) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.PutNodeCredential(ctx, c) })
	}
	byToken := func(h string) (*model.NodeCredential, error) {
		var c *model.NodeCredential
		err := s.View(ctx, func(tx store.Tx) error {
			var err error
			c, err = tx.NodeCredentialByToken(ctx, h)
			return err
		})
		return c, err
	}
	if err := put(&model.NodeCredential{ID: "n2", TokenSHA256: "h-n2", EnrolledAt: at}); err != nil {
		t.Fatalf("enrol n2: %v", err)
	}
	if err := put(&model.NodeCredential{ID: "n1", TokenSHA256: "h1", EnrolledAt: at}); err != nil {
		t.Fatalf("enrol n1: %v", err)
	}
	if c, err := byToken("h1"); err != nil || c.ID != "n1" || !c.EnrolledAt.Equal(at) || c.Revoked() {
		t.Fatalf("by token h1 = %+v, %v", c, err)
	}
	if err := put(&model.NodeCredential{ID: "n1", TokenSHA256: "h2", EnrolledAt: at.Add(time.Second)}); err != nil {
		t.Fatalf("rotate n1: %v", err)
	}
	if _, err := byToken("h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the rotated-out hash still matches: %v", err)
	}
	if c, err := byToken("h2"); err != nil || c.ID != "n1" {
		t.Fatalf("by token h2 = %+v, %v", c, err)
	}
	if err := put(&model.NodeCredential{ID: "n2", TokenSHA256: "h2", EnrolledAt: at}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("n2 with n1's hash: %v, want ErrConflict", err)
	}
	revoked := at.Add(2 * time.Second)
	if err := put(&model.NodeCredential{ID: "n1", TokenSHA256: "h2", EnrolledAt: at.Add(time.Second), RevokedAt: &revoked}); err != nil {
		t.Fatalf("revoke n1: %v", err)
	}
	err := s.View(ctx, func(tx store.Tx) error {
		if err := tx.PutNodeCredential(ctx, &model.NodeCredential{ID: "x", TokenSHA256: "hx"}); err == nil {
			t.Error("PutNodeCredential in a read-only transaction succeeded")
		}
		c, err := tx.NodeCredential(ctx, "n1")
		if err != nil || !c.Revoked() || !c.RevokedAt.Equal(revoked) || c.TokenSHA256 != "h2" {
			t.Errorf("n1 after revoke = %+v, %v", c, err)
		}
		if _, err := tx.NodeCredential(ctx, "ghost"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("NodeCredential(ghost) err = %v", err)
		}
		all, err := tx.NodeCredentials(ctx)
		if err != nil || len(all) != 2 || all[0].ID != "n1" || all[1].ID != "n2" || all[1].TokenSHA256 != "h-n2" {
			t.Errorf("NodeCredentials = %+v, %v", all, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
