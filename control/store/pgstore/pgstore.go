// Package pgstore keeps the control plane's state in PostgreSQL, for
// several control instances sharing one database (HA).
//
// One instance writes at a time: the holder of the lease row (holder,
// epoch, expires_at by the database clock). The holder renews it every
// TTL/3; when it lapses another instance takes it over and increments the
// epoch, so its snapshot versions (epoch, sequence) sort after the old
// holder's. Every write transaction is fenced at commit: a deferred
// trigger checks, inside COMMIT, that the transaction's lease (holder,
// epoch) is current and unexpired by the database clock, holding the
// lease row FOR SHARE, which a takeover's UPDATE conflicts with (see
// fence.go and migrations/002_fence.sql). An instance whose lease lapsed
// by its own clock refuses writes at once, without asking the database. Events are written to an outbox table in the
// transaction of the change, sent with NOTIFY on commit, published to this
// instance's subscribers after commit, and picked up by other instances by
// LISTEN and by polling the outbox.
package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// Options configure a Store.
type Options struct {
	DSN      string        // postgres://user@host:port/db?sslmode=...
	Instance string        // this instance's name in the lease; default host-pid-random
	LeaseTTL time.Duration // default 10s; renewed every TTL/3
	// Poll is how often the outbox is read besides LISTEN; default 1s.
	Poll time.Duration
	// TxIdleTimeout is the idle_in_transaction_session_timeout of write
	// transactions: the server ends a session idle inside one this long
	// (a paused or dead leader), aborting it and freeing its row locks.
	// Default TTL/2; it must exceed the longest pause between a write
	// transaction's statements (signing a large snapshot).
	TxIdleTimeout time.Duration
	// BeforeCommit, when set, is called after a write transaction's
	// function returned and before COMMIT, with the events it emitted:
	// a hook for tests and failover drills (pause the process there).
	BeforeCommit func(ctx context.Context, events []model.Event)
	Logger       *slog.Logger
}

// Store is a PostgreSQL store.Store.
type Store struct {
	opt  Options
	pool *pgxpool.Pool
	log  *slog.Logger

	lease  leaseState
	writer chan struct{} // holds one token while a write transaction runs

	mu       sync.Mutex
	subs     []func(model.Event)
	lastSeen int64 // newest event id published here

	suspend atomic.Bool // test and drill hook: stop renewing
	closed  atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open connects, applies the embedded schema migrations, and returns the
// store. It does not take the lease: Run does.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.TxIdleTimeout <= 0 {
		o.TxIdleTimeout = o.LeaseTTL / 2
	}
	if o.Instance == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Instance = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	pool, err := pgxpool.New(ctx, o.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	s := &Store{opt: o, pool: pool, log: o.Logger.With("instance", o.Instance), writer: make(chan struct{}, 1)}
	v, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM events").Scan(&s.lastSeen); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: read outbox: %w", err)
	}
	s.log.Info("postgres store open", "schema_version", v, "lease_ttl", o.LeaseTTL.String())
	return s, nil
}

// Instance is this instance's name in the lease.
func (s *Store) Instance() string { return s.opt.Instance }

// SuspendRenewal stops (true) or restarts (false) lease renewal and
// takeover attempts, as a paused or partitioned process would: for tests
// and failover drills.
func (s *Store) SuspendRenewal(v bool) { s.suspend.Store(v) }

// Update runs fn in a transaction fenced by the lease.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	epoch, ok := s.lease.valid()
	if !ok || s.closed.Load() {
		return store.ErrNotLeader
	}
	return s.update(ctx, epoch, fn)
}

// View runs fn in a read-only transaction (any instance).
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	ptx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("postgres store: begin: %w", err)
	}
	defer func() { _ = ptx.Rollback(context.Background()) }()
	epoch, _ := s.lease.valid()
	return fn(&tx{tx: ptx, epoch: epoch, ro: true})
}

// PutNode records a node report (any instance; not fenced).
func (s *Store) PutNode(ctx context.Context, n *model.Node) error {
	doc, err := json.Marshal(n)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO nodes (id, doc, seen_at) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, seen_at = excluded.seen_at`, n.NodeID, doc, n.SeenAt)
	if err != nil {
		return fmt.Errorf("postgres store: put node %s: %w", n.NodeID, err)
	}
	return nil
}

// Nodes returns every node record sorted by id.
func (s *Store) Nodes(ctx context.Context) ([]model.Node, error) {
	rows, err := s.pool.Query(ctx, "SELECT doc FROM nodes ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("postgres store: nodes: %w", err)
	}
	var out []model.Node
	for rows.Next() {
		var doc []byte
		var n model.Node
		if err := rows.Scan(&doc); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(doc, &n); err != nil {
			return nil, fmt.Errorf("postgres store: decode node: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// Subscribe registers fn for events published after commit, here or by
// other instances.
func (s *Store) Subscribe(fn func(model.Event)) {
	s.mu.Lock()
	s.subs = append(s.subs[:len(s.subs):len(s.subs)], fn)
	s.mu.Unlock()
}

// deliver publishes events newer than the last one published.
func (s *Store) deliver(evs []model.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range evs {
		if e.ID <= s.lastSeen {
			continue
		}
		s.lastSeen = e.ID
		for _, fn := range s.subs {
			fn(e)
		}
	}
}

// Run keeps the lease (renewing or trying to take it over every TTL/3)
// and the event feed until ctx ends.
func (s *Store) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() { defer close(done); s.listen(ctx) }()
	s.keepLease(ctx)
	<-done
	return nil
}

// Close releases the lease, if held, so another instance takes over at
// once, and closes the connections.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.release()
	s.pool.Close()
	return nil
}

// Abandon closes the connections without releasing the lease, as a
// killed process would: another instance takes over when it expires.
func (s *Store) Abandon() {
	if s.closed.Swap(true) {
		return
	}
	s.lease.lost(0)
	s.pool.Close()
}
