package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/pgtest"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/control/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func open(t *testing.T, dsn, name string, ttl time.Duration) *Store {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DSN: dsn, Instance: name, LeaseTTL: ttl, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { _ = s.Close(); cancel(); <-done })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, open(t, pgtest.DSN(t), "a", 2*time.Second))
}

// Migrations apply once; a second instance on the same database finds
// them applied.
func TestMigrationsIdempotent(t *testing.T) {
	dsn := pgtest.DSN(t)
	open(t, dsn, "a", time.Second)
	s := open(t, dsn, "b", time.Second)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil || n != len(ms) {
		t.Fatalf("schema_migrations rows = %d, %v; want %d", n, err, len(ms))
	}
}

func put(ctx context.Context, s store.Store, subject string) error {
	return s.Update(ctx, func(tx store.Tx) error { return tx.Emit(ctx, model.EventFleet, subject) })
}

// Only the holder writes; when it stops renewing, the other takes over
// with epoch+1, the old one refuses writes at once by its own clock, and
// even a write that skipped that check is refused by the fence in the
// transaction. Events of the new leader reach the old instance.
func TestLeaseTakeoverAndFencing(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const ttl = time.Second
	a := open(t, dsn, "a", ttl)
	la := storetest.WaitLeader(t, a, 30*time.Second)
	b := open(t, dsn, "b", ttl)
	time.Sleep(ttl / 2)
	if b.Leader().Leader {
		t.Fatal("both instances lead")
	}
	if err := put(ctx, b, "b1"); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("write on the follower: %v, want ErrNotLeader", err)
	}
	if err := put(ctx, a, "a1"); err != nil {
		t.Fatalf("write on the leader: %v", err)
	}
	seen := make(chan model.Event, 16)
	a.Subscribe(func(e model.Event) { seen <- e })

	a.SuspendRenewal(true)
	stopped := time.Now()
	lb := storetest.WaitLeader(t, b, 30*ttl)
	took := time.Since(stopped)
	if lb.Epoch != la.Epoch+1 {
		t.Fatalf("epoch after takeover = %d, want %d", lb.Epoch, la.Epoch+1)
	}
	t.Logf("takeover after the holder stopped renewing: %s (lease TTL %s, attempts every %s)", took.Round(time.Millisecond), ttl, ttl/3)
	if a.Leader().Leader {
		t.Fatal("the old holder still claims the lease after the takeover")
	}
	if err := put(ctx, a, "a2"); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("write on the lapsed holder: %v, want ErrNotLeader", err)
	}
	// Skip the local check: the fence inside the transaction refuses.
	if err := a.update(ctx, la.Epoch, func(tx store.Tx) error { return tx.Emit(ctx, model.EventFleet, "a3") }); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("fenced write with the old epoch: %v, want ErrNotLeader", err)
	}
	if err := put(ctx, b, "b2"); err != nil {
		t.Fatalf("write on the new leader: %v", err)
	}
	select {
	case e := <-seen:
		if e.Subject != "b2" || e.Epoch != lb.Epoch {
			t.Fatalf("event on the old instance = %+v", e)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the new leader's event did not reach the other instance")
	}
	// Sequences continue across epochs.
	var s1, s2 uint64
	_ = b.Update(ctx, func(tx store.Tx) error { s1, _ = tx.NextSequence(ctx); s2, _ = tx.NextSequence(ctx); return nil })
	if s2 != s1+1 {
		t.Fatalf("sequences %d, %d", s1, s2)
	}
}

// Close releases the lease: the other instance takes over without
// waiting for it to expire. a holds the lease for 10 minutes at a time, b
// tries every second: b can lead within the 60 s liveness deadline only
// because a released it (an order, not a speed).
func TestCloseReleasesLease(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := open(t, dsn, "a", 10*time.Minute)
	la := storetest.WaitLeader(t, a, 30*time.Second)
	b := open(t, dsn, "b", 3*time.Second)
	if b.Leader().Leader {
		t.Fatal("b leads while a holds an unexpired lease")
	}
	_ = a.Close()
	start := time.Now()
	if lb := storetest.WaitLeader(t, b, 60*time.Second); lb.Epoch != la.Epoch+1 {
		t.Fatalf("epoch after the release %d, want %d", lb.Epoch, la.Epoch+1)
	}
	t.Logf("FIGURE takeover %s after a release (b tries every 1 s)", time.Since(start).Round(time.Millisecond))
}
