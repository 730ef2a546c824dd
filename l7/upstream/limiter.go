package upstream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTooManyConnections is returned by Get when the pools' limiter is at its
// connection limit and as many requests as allowed already wait for one:
// the caller answers at once (503) instead of queueing.
var ErrTooManyConnections = errors.New("upstream connection limit reached")

// Limiter bounds the connections a group of pools (one cluster) keeps open,
// and how many requests may wait for one when all are busy. A request that
// needs a connection at the limit first closes an idle connection of another
// pool of the group; only when none is idle does it wait, bounded by
// maxPending and its deadline.
type Limiter struct {
	maxConns   atomic.Int64
	maxPending atomic.Int64
	open       atomic.Int64
	pending    atomic.Int64
	wake       chan struct{}

	mu    sync.Mutex
	pools []*Pool
}

// NewLimiter returns a limiter for maxConns connections and maxPending
// waiting requests.
func NewLimiter(maxConns, maxPending int) *Limiter {
	l := &Limiter{wake: make(chan struct{}, 64)}
	l.SetLimits(maxConns, maxPending)
	return l
}

// SetLimits changes the limits; connections above a lowered limit close as
// they are released.
func (l *Limiter) SetLimits(maxConns, maxPending int) {
	l.maxConns.Store(int64(maxConns))
	l.maxPending.Store(int64(maxPending))
}

// Open and Pending report the current counts.
func (l *Limiter) Open() int64    { return l.open.Load() }
func (l *Limiter) Pending() int64 { return l.pending.Load() }

func (l *Limiter) add(p *Pool) {
	l.mu.Lock()
	l.pools = append(l.pools, p)
	l.mu.Unlock()
}

func (l *Limiter) remove(p *Pool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, q := range l.pools {
		if q == p {
			l.pools = append(l.pools[:i], l.pools[i+1:]...)
			return
		}
	}
}

// tryOpen takes a connection slot if one is free.
func (l *Limiter) tryOpen() bool {
	for {
		n := l.open.Load()
		if n >= l.maxConns.Load() {
			return false
		}
		if l.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// closed gives a slot back.
func (l *Limiter) closed() {
	l.open.Add(-1)
	l.signal()
}

func (l *Limiter) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// evictIdle closes one idle connection of any pool of the group, freeing a
// slot; it reports whether it found one.
func (l *Limiter) evictIdle() bool {
	l.mu.Lock()
	pools := append([]*Pool(nil), l.pools...)
	l.mu.Unlock()
	for _, p := range pools {
		if c := p.takeOldestIdle(); c != nil {
			c.close()
			return true
		}
	}
	return false
}

// acquire returns once the caller may dial (a slot is taken), or fails.
func (l *Limiter) acquire(ctx context.Context, deadline time.Time, p *Pool) (*Conn, error) {
	if l.tryOpen() || (l.evictIdle() && l.tryOpen()) {
		return nil, nil
	}
	if l.pending.Add(1) > l.maxPending.Load() {
		l.pending.Add(-1)
		return nil, ErrTooManyConnections
	}
	defer l.pending.Add(-1)
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-l.wake:
		case <-timeout:
			return nil, context.DeadlineExceeded
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c := p.takeFresh(0); c != nil {
			return c, nil
		}
		if l.tryOpen() || (l.evictIdle() && l.tryOpen()) {
			return nil, nil
		}
	}
}
