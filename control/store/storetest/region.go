package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// regionControl checks the region control record: zero before any, kept
// as written, replaced whole, refused in a read-only transaction.
func regionControl(t *testing.T, s store.Store) {
	ctx := context.Background()
	err := s.View(ctx, func(tx store.Tx) error {
		c, err := tx.RegionControl(ctx)
		if err != nil || len(c.Drains) != 0 || len(c.Writers) != 0 {
			t.Errorf("empty RegionControl = %+v, %v", c, err)
		}
		if err := tx.PutRegionControl(ctx, &model.RegionControl{}); err == nil {
			t.Error("PutRegionControl in a read-only transaction succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	want := &model.RegionControl{
		Drains:    []model.RegionDrain{{Region: "eu-west", Reason: "maintenance", By: "ops", Since: now}},
		Writers:   []model.PlatformWriter{{Platform: "billing", Region: "us-east", Epoch: 3, By: "ops", SwitchedAt: now}},
		UpdatedAt: now,
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.PutRegionControl(ctx, want)
	})
	if err != nil {
		t.Fatalf("PutRegionControl: %v", err)
	}
	err = s.View(ctx, func(tx store.Tx) error {
		c, err := tx.RegionControl(ctx)
		if err != nil {
			return err
		}
		if len(c.Drains) != 1 || c.Drains[0] != want.Drains[0] || len(c.Writers) != 1 || c.Writers[0] != want.Writers[0] || !c.UpdatedAt.Equal(now) {
			t.Errorf("RegionControl = %+v, want %+v", c, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A later write replaces the record whole.
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.PutRegionControl(ctx, &model.RegionControl{Writers: []model.PlatformWriter{{Platform: "billing", Region: "eu-west", Epoch: 4, SwitchedAt: now}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(ctx, func(tx store.Tx) error {
		c, err := tx.RegionControl(ctx)
		if err != nil || len(c.Drains) != 0 || len(c.Writers) != 1 || c.Writers[0].Epoch != 4 || c.Writers[0].Region != "eu-west" {
			t.Errorf("RegionControl after replace = %+v, %v", c, err)
		}
		return nil
	})
}
