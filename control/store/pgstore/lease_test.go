package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/pgtest"
	"github.com/rampart-edge/rampart/control/store/storetest"
)

// A takeover the server applied but whose answer the instance never read
// (the statement's deadline passed on a busy box, the connection broke):
// the database names this instance the holder of epoch e+1, unexpired,
// while the instance still thinks it follows. It adopts that lease (same
// epoch) at its next attempt instead of waiting its own lease out and
// taking it again one epoch up (e+2); the old holder steps down.
func TestLostTakeoverAnswerAdopted(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	a := open(t, dsn, "a", time.Second)
	la := storetest.WaitLeader(t, a, 30*time.Second)
	b := open(t, dsn, "b", time.Second)
	// b's takeover as the server applied it; b never saw the answer. The
	// lease lasts an hour, so waiting it out would not end the test.
	if _, err := b.pool.Exec(ctx, `UPDATE lease SET holder = 'b', epoch = epoch + 1,
		expires_at = clock_timestamp() + interval '1 hour' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	lb := storetest.WaitLeader(t, b, 30*time.Second)
	if lb.Epoch != la.Epoch+1 {
		t.Fatalf("b leads with epoch %d, want %d (the one the server gave it)", lb.Epoch, la.Epoch+1)
	}
	if err := put(ctx, b, "adopted"); err != nil {
		t.Fatalf("write under the adopted lease: %v", err)
	}
	if n := eventCount(t, b, "adopted"); n != 1 {
		t.Fatalf("the write under the adopted lease: %d rows", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for a.Leader().Leader && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if a.Leader().Leader {
		t.Fatal("the old holder still leads")
	}
	if err := put(ctx, a, "old"); err == nil {
		t.Fatal("the old holder wrote after the takeover")
	}
}
