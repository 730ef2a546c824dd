// Package store is the control plane's storage interface. Two
// implementations keep the same data with the same semantics:
// store/boltstore (embedded, one machine) and store/pgstore (PostgreSQL,
// several instances with a single writer chosen by a lease).
//
// Every change goes through Update: one transaction fenced by the
// writer's epoch (the lease), checked before the work and again at commit,
// and whose events (an outbox) are published to subscribers after it
// commits. Node status reports are
// observations, not configuration: PutNode is not fenced, so any instance
// can record them.
package store

import (
	"context"
	"errors"

	"github.com/rampart-edge/rampart/control/model"
)

// Errors stores return; match them with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	// ErrNotLeader: this instance does not hold the write lease (or lost
	// it); the write was not made.
	ErrNotLeader = errors.New("not the leader: this control instance does not hold the write lease")
	// ErrConflict: a unique key (revision id or idempotency key) exists.
	ErrConflict = errors.New("conflict")
)

// Store keeps the control plane's state.
type Store interface {
	// Update runs fn in a write transaction fenced by the lease epoch:
	// it fails with ErrNotLeader, without running fn, when this instance
	// does not hold the lease, and commits only if it still holds it
	// during the commit (else ErrNotLeader, nothing written). The events
	// fn emitted are published after the commit.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only transaction; Emit and the Put methods
	// fail there.
	View(ctx context.Context, fn func(Tx) error) error
	// PutNode records a node's status report (not fenced).
	PutNode(ctx context.Context, n *model.Node) error
	// Nodes returns every node record, sorted by node id.
	Nodes(ctx context.Context) ([]model.Node, error)
	// Leader says whether this instance may write now, and with which
	// epoch. An instance whose lease lapsed says false at once.
	Leader() Leadership
	// Subscribe calls fn with every event published after commit, from
	// this instance or (for shared stores) from others. fn must not block.
	Subscribe(fn func(model.Event))
	// Run keeps the lease and the event feed going until ctx ends.
	Run(ctx context.Context) error
	// Close releases the lease (so another instance can take over at
	// once) and the store's resources.
	Close() error
}

// Leadership is the state of this instance's write lease.
type Leadership struct {
	Leader   bool   `json:"leader"`
	Epoch    uint64 `json:"epoch"`  // fencing epoch; snapshot versions carry it
	Holder   string `json:"holder"` // instance id of the lease holder, when known
	Instance string `json:"instance"`
}

// Tx is one transaction.
type Tx interface {
	// Epoch is the fencing epoch of a write transaction.
	Epoch() uint64
	// NextSequence returns the next snapshot sequence number (never reused).
	NextSequence(ctx context.Context) (uint64, error)

	// PutRevision inserts a revision and its snapshot file; ErrConflict
	// when the id or idempotency key exists.
	PutRevision(ctx context.Context, r *model.Revision, snapshot []byte) error
	Revision(ctx context.Context, id string) (*model.Revision, error)
	RevisionByKey(ctx context.Context, key string) (*model.Revision, error)
	// Revisions returns up to limit revisions, newest first, older than
	// the sequence before (0: from the newest).
	Revisions(ctx context.Context, before uint64, limit int) ([]*model.Revision, error)
	Snapshot(ctx context.Context, id string) ([]byte, error)

	// PutRollout inserts or replaces the rollout of a revision.
	PutRollout(ctx context.Context, r *model.Rollout) error
	Rollout(ctx context.Context, id string) (*model.Rollout, error)
	// Rollouts returns up to limit rollouts, newest first; with open, only
	// pending and staging ones, oldest first.
	Rollouts(ctx context.Context, open bool, limit int) ([]*model.Rollout, error)

	Fleet(ctx context.Context) (*model.Fleet, error) // zero Fleet before any
	PutFleet(ctx context.Context, f *model.Fleet) error
	Deny(ctx context.Context) (*model.DenyState, error) // zero state before any
	PutDeny(ctx context.Context, d *model.DenyState) error
	// RegionControl is the operator state of regions and platforms
	// (drains, writers); a zero one before any.
	RegionControl(ctx context.Context) (*model.RegionControl, error)
	PutRegionControl(ctx context.Context, c *model.RegionControl) error
	// Purge is the cache purge channel's state (rules and signed file); a
	// zero one before any. PutPurge replaces it; its sequence may not go
	// back (an error, nothing written).
	Purge(ctx context.Context) (*model.PurgeState, error)
	PutPurge(ctx context.Context, p *model.PurgeState) error

	// PutNodeCredential inserts or replaces the credential of a node id
	// (enrolment, rotation, revocation): the previous token hash of the id
	// stops matching at once. ErrConflict when another id has the hash.
	PutNodeCredential(ctx context.Context, c *model.NodeCredential) error
	// NodeCredential returns the credential of a node id (ErrNotFound).
	NodeCredential(ctx context.Context, id string) (*model.NodeCredential, error)
	// NodeCredentialByToken returns the credential whose token hash (hex
	// SHA-256) this is, revoked or not (ErrNotFound).
	NodeCredentialByToken(ctx context.Context, sha256hex string) (*model.NodeCredential, error)
	// NodeCredentials returns every credential sorted by node id.
	NodeCredentials(ctx context.Context) ([]*model.NodeCredential, error)

	// Emit adds an event to the outbox, published after commit.
	Emit(ctx context.Context, kind, subject string) error
}
