// Package boltstore is the embedded store: one bbolt file in a data
// directory, for a control plane on one machine (no server to install).
//
// The file lock makes the opening process the only writer, so it always
// holds the "lease"; each Open increments the fencing epoch, so snapshots
// published after a restart sort after earlier ones. Events are published
// to subscribers after each commit. Node status reports are soft state kept
// in memory (nodes report again within seconds after a restart).
package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// FileName is the database file inside the data directory.
const FileName = "control.db"

var (
	bMeta      = []byte("meta")
	bRevisions = []byte("revisions")
	bSnapshots = []byte("snapshots")
	bIdem      = []byte("idempotency")
	bRollouts  = []byte("rollouts")

	kEpoch = []byte("epoch")
	kSeq   = []byte("sequence")
	kFleet = []byte("fleet")
	kDeny  = []byte("deny")
	kDenyF = []byte("deny_file")
	// kRegions holds model.RegionControl (drains, writers).
	kRegions = []byte("region_control")
	// kPurge holds model.PurgeState, kPurgeF its signed file.
	kPurge  = []byte("purge")
	kPurgeF = []byte("purge_file")
)

// Store is a bbolt-backed store.Store.
type Store struct {
	db       *bolt.DB
	epoch    uint64
	instance string

	mu    sync.Mutex
	nodes map[string]model.Node
	subs  []func(model.Event)

	eventID atomic.Int64
	closed  atomic.Bool
}

var _ store.Store = (*Store)(nil)

// Open opens (or creates) the store in dir and takes the next epoch. It
// fails after a few seconds when another process has the file open.
func Open(dir, instance string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 3 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("embedded store: open %s (is another control plane using it?): %w", path, err)
	}
	s := &Store{db: db, instance: instance, nodes: map[string]model.Node{}}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bMeta, bRevisions, bSnapshots, bIdem, bRollouts, bCreds, bCredTok} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		m := tx.Bucket(bMeta)
		s.epoch = getUint(m, kEpoch) + 1
		return putUint(m, kEpoch, s.epoch)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded store: initialise %s: %w", path, err)
	}
	return s, nil
}

// Leader: the process that opened the file is the only writer.
func (s *Store) Leader() store.Leadership {
	return store.Leadership{Leader: !s.closed.Load(), Epoch: s.epoch, Holder: s.instance, Instance: s.instance}
}

// Update runs fn in a write transaction and publishes its events after commit.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.closed.Load() {
		return store.ErrNotLeader
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t := &tx{epoch: s.epoch}
	err := s.db.Update(func(btx *bolt.Tx) error {
		t.tx = btx
		return fn(t)
	})
	if err != nil {
		return err
	}
	s.publish(t.events)
	return nil
}

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(btx *bolt.Tx) error { return fn(&tx{tx: btx, epoch: s.epoch, ro: true}) })
}

func (s *Store) publish(evs []model.Event) {
	if len(evs) == 0 {
		return
	}
	s.mu.Lock()
	subs := s.subs
	s.mu.Unlock()
	for _, e := range evs {
		e.ID = s.eventID.Add(1)
		for _, fn := range subs {
			fn(e)
		}
	}
}

// Subscribe registers fn for events published after commit.
func (s *Store) Subscribe(fn func(model.Event)) {
	s.mu.Lock()
	s.subs = append(s.subs[:len(s.subs):len(s.subs)], fn)
	s.mu.Unlock()
}

// PutNode keeps a node's report in memory.
func (s *Store) PutNode(_ context.Context, n *model.Node) error {
	s.mu.Lock()
	s.nodes[n.NodeID] = *n
	s.mu.Unlock()
	return nil
}

// Nodes returns the node records sorted by id.
func (s *Store) Nodes(context.Context) ([]model.Node, error) {
	s.mu.Lock()
	out := make([]model.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

// Run has nothing to keep alive; it waits for ctx.
func (s *Store) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Close closes the file.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}

func getUint(b *bolt.Bucket, k []byte) uint64 {
	if v := b.Get(k); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func putUint(b *bolt.Bucket, k []byte, v uint64) error {
	return b.Put(k, binary.BigEndian.AppendUint64(nil, v))
}

var errReadOnly = errors.New("embedded store: write in a read-only transaction")
