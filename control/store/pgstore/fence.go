package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rampart-edge/rampart/control/store"
)

// SQLSTATEs the fence maps to store.ErrNotLeader.
const (
	codeFence         = "RF001" // raised by rampart_fence() at commit
	codeIdleInTxKill  = "25P03" // idle_in_transaction_session_timeout ended the session
	codeLockTimeout   = "55P03"
	codeQueryCanceled = "57014" // statement_timeout
)

// update runs fn in a write transaction fenced by the lease of epoch:
//
//  1. the first statement sets, for this transaction only, the lease it
//     writes under (rampart.fence_holder, rampart.fence_epoch), the
//     server-side timeouts (idle_in_transaction_session_timeout,
//     lock_timeout and statement_timeout), and checks the lease without
//     locking it, so a follower does not run fn at all;
//  2. fn writes (one write transaction at a time in this instance); no
//     lock on the lease row is held meanwhile, so a takeover never waits
//     for a paused holder;
//  3. COMMIT runs the deferred fence trigger of every written row, which
//     checks the lease again by the database clock holding its row FOR
//     SHARE until the commit ends: a takeover (UPDATE of that row) and the
//     commit serialise, and a lapsed or taken-over lease aborts the commit.
//
// A holder paused inside the transaction is ended by the server after
// TxIdleTimeout, which aborts the transaction and frees its row locks.
func (s *Store) update(ctx context.Context, epoch uint64, fn func(store.Tx) error) error {
	// One write transaction at a time, as in the embedded store: the
	// plane reads, decides and writes in one transaction and relies on
	// no other write interleaving (READ COMMITTED alone would let two lose
	// each other's update). Across instances the fence orders them: a
	// write of epoch e commits before epoch e+1 begins or not at all.
	select {
	case s.writer <- struct{}{}:
		defer func() { <-s.writer }()
	case <-ctx.Done():
		return fmt.Errorf("postgres store: wait for the write transaction in progress: %w", ctx.Err())
	}
	ptx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("postgres store: begin: %w", err)
	}
	defer func() { _ = ptx.Rollback(context.Background()) }()
	ms := func(d interface{ Milliseconds() int64 }) string {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	var held bool
	err = ptx.QueryRow(ctx, `SELECT set_config('rampart.fence_holder', $1, true), set_config('rampart.fence_epoch', $2, true),
			set_config('idle_in_transaction_session_timeout', $3, true),
			set_config('lock_timeout', $4, true), set_config('statement_timeout', $4, true),
			EXISTS (SELECT 1 FROM lease WHERE id = 1 AND holder = $1 AND epoch = $2::bigint AND expires_at > clock_timestamp())`,
		s.opt.Instance, strconv.FormatUint(epoch, 10), ms(s.opt.TxIdleTimeout), ms(s.opt.LeaseTTL)).
		Scan(nil, nil, nil, nil, nil, &held)
	if err != nil {
		return s.fenceErr(epoch, "check lease", err)
	}
	if !held {
		s.lease.lost(epoch)
		return store.ErrNotLeader
	}
	t := &tx{tx: ptx, epoch: epoch}
	if err := fn(t); err != nil {
		return s.fenceErr(epoch, "", err)
	}
	if n := len(t.events); n > 0 {
		if _, err := ptx.Exec(ctx, "SELECT pg_notify('rampart_events', $1)", fmt.Sprint(t.events[n-1].ID)); err != nil {
			return s.fenceErr(epoch, "notify", err)
		}
	}
	if s.opt.BeforeCommit != nil {
		s.opt.BeforeCommit(ctx, t.events)
	}
	if err := ptx.Commit(ctx); err != nil {
		return s.fenceErr(epoch, "commit", err)
	}
	s.deliver(t.events)
	return nil
}

// fenceErr says why a write transaction of epoch failed. The fence
// refusing the commit, and the server ending a session left idle in the
// transaction, are store.ErrNotLeader (nothing was written); what (when
// set) names the step for other errors.
func (s *Store) fenceErr(epoch uint64, what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeFence:
			s.lease.lost(epoch)
			return fmt.Errorf("%w: postgres store: the commit was refused: %s", store.ErrNotLeader, pe.Message)
		case codeIdleInTxKill: // the lease may still be ours: only this write is lost
			return fmt.Errorf("%w: postgres store: the server ended the write transaction of epoch %d after %s idle in it (paused?); nothing was written",
				store.ErrNotLeader, epoch, s.opt.TxIdleTimeout)
		case codeLockTimeout, codeQueryCanceled:
			return fmt.Errorf("postgres store: write transaction of epoch %d: waited over %s (lock_timeout/statement_timeout): %w", epoch, s.opt.LeaseTTL, err)
		}
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("postgres store: %s: %w", what, err)
}
