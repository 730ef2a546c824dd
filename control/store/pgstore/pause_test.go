package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/pgtest"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/control/store/storetest"
)

// eventCount counts outbox rows with a subject, read on the store's pool.
func eventCount(t *testing.T, s *Store, subject string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM events WHERE subject = $1", subject).Scan(&n); err != nil {
		t.Fatalf("count events %q: %v", subject, err)
	}
	return n
}

// A leader paused inside a write transaction (after it took the sequence
// row lock and wrote to the outbox) as SIGSTOP would: it stops renewing
// and its transaction stands still. The other instance takes the lease
// over within TTL plus a renew period, and writes (the sequence row
// included) without waiting for the paused session; when the paused
// leader resumes, its commit is refused and nothing of it is kept.
func TestPausedInsideTransaction(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const ttl = time.Second
	a := open(t, dsn, "a", ttl)
	la := storetest.WaitLeader(t, a, 30*time.Second)
	b := open(t, dsn, "b", ttl)

	inside, release := make(chan time.Time, 1), make(chan struct{})
	result := make(chan error, 1)
	go func() {
		result <- a.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.NextSequence(ctx); err != nil {
				return err
			}
			if err := tx.Emit(ctx, model.EventFleet, "paused"); err != nil {
				return err
			}
			a.SuspendRenewal(true) // the whole process stands still
			inside <- time.Now()
			<-release
			return nil
		})
	}()
	var paused time.Time
	select {
	case paused = <-inside:
	case err := <-result:
		t.Fatalf("the write ended before it paused: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not start within 30s")
	}
	// Wait (bounded) for the takeover; the pause lasts until it happened
	// or 30 TTLs passed.
	deadline := time.Now().Add(30 * ttl)
	for !b.Leader().Leader && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(paused)
	led := b.Leader()
	var wrote time.Duration
	var werr error
	if led.Leader {
		wctx, cancel := context.WithTimeout(ctx, 30*ttl)
		werr = b.Update(wctx, func(tx store.Tx) error {
			if _, err := tx.NextSequence(wctx); err != nil {
				return err
			}
			return tx.Emit(wctx, model.EventFleet, "survivor")
		})
		cancel()
		wrote = time.Since(paused)
	}
	close(release)
	aerr := <-result
	resumed := time.Since(paused)
	if !led.Leader { // for the figure: when the takeover happens after the resume
		for i := 0; i < 1000 && !b.Leader().Leader; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("FIGURE takeover only %s after the pause, once the paused transaction ended (leader=%v)",
			time.Since(paused).Round(time.Millisecond), b.Leader().Leader)
	}
	t.Logf("FIGURE leader paused inside a write transaction (lease TTL %s, renew every %s): takeover %v after the pause (leader=%v epoch %d→%d), survivor's write done %s after the pause (err %v); paused leader resumed after %s: commit err %v",
		ttl, ttl/3, took.Round(time.Millisecond), led.Leader, la.Epoch, led.Epoch, wrote.Round(time.Millisecond), werr, resumed.Round(time.Millisecond), aerr)
	if !led.Leader || led.Epoch != la.Epoch+1 {
		t.Fatalf("no takeover while the leader was paused inside a transaction: %+v", led)
	}
	if werr != nil {
		t.Fatalf("the survivor's write failed: %v", werr)
	}
	if !errors.Is(aerr, store.ErrNotLeader) {
		t.Fatalf("the paused leader's commit: %v, want ErrNotLeader", aerr)
	}
	if n := eventCount(t, b, "paused"); n != 0 {
		t.Fatalf("the paused leader's write was kept (%d rows)", n)
	}
	if n := eventCount(t, b, "survivor"); n != 1 {
		t.Fatalf("the survivor's write: %d rows", n)
	}
}

// openWith opens and runs a store with o (DSN and Poll filled in).
func openWith(t *testing.T, dsn string, o Options) *Store {
	t.Helper()
	o.DSN, o.Poll = dsn, 100*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { _ = s.Close(); cancel(); <-done })
	return s
}

// pauseOn returns a BeforeCommit hook that, for a transaction that
// emitted an event with subject, stops renewing and runs wait (the
// process stands still there), and a pointer to the store to suspend.
func pauseOn(subject string, wait func(s *Store)) (func(context.Context, []model.Event), **Store) {
	var st *Store
	return func(_ context.Context, evs []model.Event) {
		for _, e := range evs {
			if e.Subject == subject {
				st.SuspendRenewal(true)
				wait(st)
				return
			}
		}
	}, &st
}

func leaseExpired(t *testing.T, s *Store) bool {
	var expired bool
	if err := s.pool.QueryRow(context.Background(), "SELECT expires_at < clock_timestamp() FROM lease").Scan(&expired); err != nil {
		t.Errorf("read lease: %v", err)
	}
	return expired
}

// A write whose lease lapsed (by the database clock) between its last
// statement and COMMIT is refused at commit, even though no other
// instance took over and the server did not end the session.
func TestCommitAfterLeaseLapsedRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	hook, sp := pauseOn("late", func(s *Store) {
		for i := 0; i < 3000 && !leaseExpired(t, s); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	})
	a := openWith(t, dsn, Options{Instance: "a", LeaseTTL: time.Second, TxIdleTimeout: 60 * time.Second, BeforeCommit: hook})
	*sp = a
	la := storetest.WaitLeader(t, a, 30*time.Second)
	if err := put(ctx, a, "on-time"); err != nil {
		t.Fatalf("write while leading: %v", err)
	}
	err := put(ctx, a, "late")
	if !errors.Is(err, store.ErrNotLeader) || !strings.Contains(err.Error(), "at commit") {
		t.Fatalf("commit after the lease lapsed: %v, want ErrNotLeader from the fence at commit", err)
	}
	t.Logf("refused: %v", err)
	if n := eventCount(t, a, "late"); n != 0 {
		t.Fatalf("the late write was kept (%d rows)", n)
	}
	if n := eventCount(t, a, "on-time"); n != 1 {
		t.Fatalf("the on-time write: %d rows", n)
	}
	var epoch int64
	if err := a.pool.QueryRow(ctx, "SELECT epoch FROM lease").Scan(&epoch); err != nil || uint64(epoch) != la.Epoch {
		t.Fatalf("lease epoch %d, %v; want %d (no takeover happened)", epoch, err, la.Epoch)
	}
	if a.Leader().Leader {
		t.Fatal("the store still claims the lease after the fence refused its commit")
	}
}

// Another instance takes over while a write stands between its last
// statement and COMMIT: the commit is refused, so no write of epoch e
// commits after epoch e+1 began.
//
// b stands still (as a paused process) until the write reaches COMMIT,
// so it cannot take the lease over earlier; should a's own lease lapse
// on a busy box before the write (refused before its commit, as it must
// be), a takes it again and the write is tried again.
func TestTakeoverBeforeCommitRefused(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const ttl = time.Second
	var a, b *Store
	var waited bool
	var wrote uint64        // the epoch of the write that reached COMMIT
	var lb store.Leadership // b's lease when the write went on to COMMIT
	hook := func(_ context.Context, evs []model.Event) {
		if len(evs) != 1 || evs[0].Subject != "late" {
			return
		}
		a.SuspendRenewal(true) // a stands still from here
		waited, wrote = true, evs[0].Epoch
		b.SuspendRenewal(false)
		deadline := time.Now().Add(30 * time.Second)
		for lb = b.Leader(); !lb.Leader && time.Now().Before(deadline); lb = b.Leader() {
			time.Sleep(10 * time.Millisecond)
		}
	}
	a = openWith(t, dsn, Options{Instance: "a", LeaseTTL: ttl, TxIdleTimeout: 60 * time.Second, BeforeCommit: hook})
	storetest.WaitLeader(t, a, 30*time.Second)
	b = openSuspended(t, dsn, "b", ttl)
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		err = put(ctx, a, "late")
		if waited || time.Now().After(deadline) {
			break
		}
		if !errors.Is(err, store.ErrNotLeader) {
			t.Fatalf("write on a before any takeover: %v", err)
		}
		t.Logf("a's lease lapsed before the write reached COMMIT (%v); again", err)
		storetest.WaitLeader(t, a, 30*time.Second)
	}
	if !waited {
		t.Fatalf("the write never reached COMMIT while a held the lease: %v", err)
	}
	if !lb.Leader || lb.Epoch != wrote+1 {
		t.Fatalf("no takeover while the write of epoch %d waited: %+v", wrote, lb)
	}
	if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("commit after the takeover: %v, want ErrNotLeader", err)
	}
	if n := eventCount(t, b, "late"); n != 0 {
		t.Fatalf("a write of epoch %d committed after epoch %d began", wrote, lb.Epoch)
	}
	// The new leader writes (retried while its lease is being renewed,
	// should a renewal on a busy box come late).
	deadline := time.Now().Add(30 * time.Second)
	for {
		storetest.WaitLeader(t, b, 30*time.Second)
		err := put(ctx, b, "new")
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrNotLeader) || time.Now().After(deadline) {
			t.Fatalf("write on the new leader: %v", err)
		}
	}
}

// openSuspended opens a store that does not renew or take the lease
// until SuspendRenewal(false), and runs it.
func openSuspended(t *testing.T, dsn, name string, ttl time.Duration) *Store {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Open(ctx, Options{DSN: dsn, Instance: name, LeaseTTL: ttl, Poll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.SuspendRenewal(true)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { _ = s.Close(); cancel(); <-done })
	return s
}

// A row written to a fenced table outside a fenced transaction (plain
// SQL on the pool) is refused by the trigger; node reports are not fenced.
func TestUnfencedWriteRefused(t *testing.T) {
	s := open(t, pgtest.DSN(t), "a", time.Second)
	storetest.WaitLeader(t, s, 30*time.Second)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, "INSERT INTO events (epoch, kind, subject) VALUES (1, 'x', 'sneaky')")
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != codeFence {
		t.Fatalf("unfenced insert into events: %v, want SQLSTATE %s", err, codeFence)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE counters SET value = value + 1"); err == nil {
		t.Fatal("unfenced update of counters succeeded")
	}
	if err := s.PutNode(ctx, &model.Node{Status: model.Status{Identity: model.Identity{NodeID: "n1"}}, SeenAt: time.Now()}); err != nil {
		t.Fatalf("node report: %v", err)
	}
}
