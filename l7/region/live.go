package region

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
)

// Live is a process's region state and recovery tracker, shared by the
// runtimes of every snapshot. The state watcher calls Set with each
// document it applies; each runtime binds its Policy once and reads the
// current View of its binding per request.
type Live struct {
	tracker *Tracker
	state   atomic.Pointer[regionstate.State]

	maxAge atomic.Int64 // ns; 0: only the policies' region_state_max_age_ms

	mu      sync.Mutex // orders Set and Bind: the current binding sees every state
	current *Binding
}

// SetMaxAge adds a bound on the state's age (the proxy's
// -region-state-max-age) to each policy's region_state_max_age_ms: the
// stricter one applies. Call it before the first Bind.
func (l *Live) SetMaxAge(d time.Duration) { l.maxAge.Store(int64(d)) }

// NewLive returns a Live without a state (every signal unknown); now nil
// means time.Now.
func NewLive(now func() time.Time) *Live {
	return &Live{tracker: NewTracker(now)}
}

// Set makes s the region state in force (nil: none) and brings the most
// recently bound policy's view up to date at once, so recovery ramps start
// when a document arrives, not when the next request does.
func (l *Live) Set(s *regionstate.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.Store(s)
	if l.current != nil {
		l.current.refresh(s)
	}
}

// State is the region state in force (nil: none).
func (l *Live) State() *regionstate.State { return l.state.Load() }

// Bind makes p the current policy (the runtime being built) and returns
// its Binding, with a view under the state in force.
func (l *Live) Bind(p *Policy) *Binding {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &Binding{live: l, policy: p}
	b.refresh(l.state.Load())
	l.current = b
	return b
}

// Binding is one Policy's view of the live state.
type Binding struct {
	live   *Live
	policy *Policy
	mu     sync.Mutex
	view   atomic.Pointer[boundView]
}

type boundView struct {
	src *regionstate.State
	v   *View
}

// Policy is the bound policy.
func (b *Binding) Policy() *Policy { return b.policy }

// View returns the view under the state in force. It rebuilds the view
// only when the state changed since (a binding that is no longer current:
// requests still finishing on an older snapshot); otherwise it is two
// atomic loads.
func (b *Binding) View() *View {
	s := b.live.state.Load()
	if bv := b.view.Load(); bv != nil && bv.src == s {
		return bv.v
	}
	return b.refresh(s)
}

func (b *Binding) refresh(s *regionstate.State) *View {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bv := b.view.Load(); bv != nil && bv.src == s {
		return bv.v
	}
	v := b.live.tracker.ViewWithin(b.policy, s, time.Duration(b.live.maxAge.Load()))
	b.view.Store(&boundView{src: s, v: v})
	return v
}
