// Package plane is the control plane's logic: it takes revisions, signs
// their snapshots, runs their staged rollouts (the engine runs on the
// lease holder only), answers nodes' long-polls for snapshots and deny
// lists, records their status reports, and keeps the deny channel. It
// talks to storage through store.Store; control/api puts HTTP on it.
package plane

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/rollout"
	"github.com/rampart-edge/rampart/control/store"
)

// Errors of requests; the API maps them to statuses (with
// store.ErrNotFound 404, store.ErrConflict 409, store.ErrNotLeader 503 and
// *snapshot.ValidationError 400).
var ErrBadRequest = errors.New("bad request")

// ShadowPolicy says what the shadow check may hold back.
type ShadowPolicy struct {
	// MaxUnexpected pauses a rollout after its shadow check when more
	// differences than this are unexpected (resume approves it); -1: never.
	MaxUnexpected int
	MaxListed     int // differences kept in the report; default 100
}

// Options configure a Plane.
type Options struct {
	Store  store.Store
	Key    ed25519.PrivateKey // signs snapshots and deny lists
	Policy rollout.Policy
	Shadow ShadowPolicy
	// WatchTimeout is how long a node's long-poll waits when it asks for
	// no timeout of its own; default 30s.
	WatchTimeout time.Duration
	Tick         time.Duration // how often the rollout engine looks; default 1s
	Refresh      time.Duration // how often the node view is re-read besides events; default 2s
	Logger       *slog.Logger

	// Regions is the rule that judges each region's health from its
	// nodes' reports (regionhealth.go).
	Regions RegionRule
	// RegionStateRefresh: a new region-state document goes out at least
	// this often, so its creation time stays fresh for the proxies'
	// max-age; default 5s. RegionStateMinInterval coalesces changes
	// closer together than it; default 50ms.
	RegionStateRefresh, RegionStateMinInterval time.Duration
}

// Plane is the control plane of one instance.
type Plane struct {
	o   Options
	st  store.Store
	pub ed25519.PublicKey
	log *slog.Logger

	view    atomic.Pointer[view]
	hub     hub
	refresh chan struct{}
	kick    chan struct{} // wakes the rollout engine (engine.go: wakeEngine)
	bakeEnd *time.Timer   // wakes it when the open stage's bake ends (engine.go; under engMu)
	seen    sync.Map      // node id → what its last report said that can move a rollout (engine.go)

	cacheMu sync.Mutex
	files   map[string][]byte // snapshot files by revision id
	engMu   sync.Mutex        // one engine step at a time

	rs     regionStates // regionstate.go
	leases leaseState   // lease.go: global quota leases
}

// New checks the options and returns a Plane; Run starts it.
func New(o Options) (*Plane, error) {
	if o.Store == nil {
		return nil, errors.New("plane: no store")
	}
	if len(o.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("plane: no Ed25519 signing key")
	}
	if err := o.Policy.Validate(); err != nil {
		return nil, err
	}
	if o.WatchTimeout <= 0 {
		o.WatchTimeout = 30 * time.Second
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Refresh <= 0 {
		o.Refresh = 2 * time.Second
	}
	if o.Shadow.MaxListed <= 0 {
		o.Shadow.MaxListed = 100
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := o.Regions.defaults(); err != nil {
		return nil, err
	}
	if o.RegionStateRefresh <= 0 {
		o.RegionStateRefresh = 5 * time.Second
	}
	if o.RegionStateMinInterval <= 0 {
		o.RegionStateMinInterval = 50 * time.Millisecond
	}
	p := &Plane{o: o, st: o.Store, pub: o.Key.Public().(ed25519.PublicKey), log: o.Logger,
		refresh: make(chan struct{}, 1), kick: make(chan struct{}, 1), files: map[string][]byte{}}
	p.rs.kick = make(chan struct{}, 1)
	p.rs.providers = append(p.rs.providers, leaseProvider{p})
	p.view.Store(&view{})
	p.hub.init()
	o.Store.Subscribe(func(model.Event) { p.poke(); p.RegionStateChanged() })
	return p, nil
}

// PublicKey verifies what the plane signs.
func (p *Plane) PublicKey() ed25519.PublicKey { return p.pub }

// Leader is the store's lease state.
func (p *Plane) Leader() store.Leadership { return p.st.Leader() }

// Policy is the rollout policy in force.
func (p *Plane) Policy() rollout.Policy { return p.o.Policy }

func (p *Plane) poke() {
	select {
	case p.refresh <- struct{}{}:
	default:
	}
}

// Run refreshes the node view on every event (and every Refresh), and
// steps the rollout engine when woken (a submission, a steer, a node
// report that matters) and every Tick as a backstop, while this instance
// leads, until ctx ends.
func (p *Plane) Run(ctx context.Context) error {
	if err := p.reload(ctx); err != nil {
		p.log.Warn("initial view", "err", err)
	}
	go p.engine(ctx)
	go p.regionStateLoop(ctx)
	go p.leaseLoop(ctx)
	t := time.NewTicker(p.o.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.hub.broadcast()
			return nil
		case <-p.refresh:
		case <-t.C:
		}
		if err := p.reload(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("refresh view", "err", err)
		}
	}
}

func (p *Plane) engine(ctx context.Context) {
	t := time.NewTicker(p.o.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		if err := p.steps(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrNotLeader) {
			p.log.Warn("rollout step", "err", err)
		}
	}
}

// update runs fn in a fenced write transaction.
func (p *Plane) update(ctx context.Context, fn func(store.Tx) error) error {
	return p.st.Update(ctx, fn)
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}
