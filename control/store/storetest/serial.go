package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/rampart-edge/rampart/control/store"
)

// serialWrites checks that write transactions do not interleave: n
// concurrent read-modify-write transactions of one value lose none of
// their updates (the plane reads, decides and writes in one transaction).
func serialWrites(t *testing.T, s store.Store) {
	ctx := context.Background()
	var start uint64
	if err := s.View(ctx, func(tx store.Tx) error {
		f, err := tx.Fleet(ctx)
		start = f.MaxPublished.Sequence
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Update(ctx, func(tx store.Tx) error {
				f, err := tx.Fleet(ctx)
				if err != nil {
					return err
				}
				f.MaxPublished.Sequence++
				return tx.PutFleet(ctx, f)
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent update: %v", err)
		}
	}
	_ = s.View(ctx, func(tx store.Tx) error {
		if f, _ := tx.Fleet(ctx); f.MaxPublished.Sequence != start+n {
			t.Errorf("after %d concurrent increments: %d, want %d (a write transaction interleaved with another)", n, f.MaxPublished.Sequence, start+n)
		}
		return nil
	})
}
