// Package upstream is rampart's HTTP/1.1 client to upstream servers: a pool of
// keep-alive connections per endpoint, a strict response-head parser, and the
// body framings of RFC 9112. It runs on the caller's goroutine: no reader or
// writer goroutines per connection, no hand-offs, so a proxied request costs
// the syscalls it needs and little else.
package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/rampart-edge/rampart/l7/wire"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// PoolConfig tunes one endpoint's pool.
type PoolConfig struct {
	ConnectTimeout time.Duration // default 2s
	MaxIdle        int           // idle connections kept, default 1024
	IdleTimeout    time.Duration // an idle connection older than this is closed, default 30s
	// Limiter, when set, bounds connections across the pools sharing it.
	Limiter *Limiter
}

// Pool holds idle keep-alive connections to one upstream address. Idle
// connections are reused newest first (LIFO), so a burst's extra connections
// age out while the hot ones stay warm. A connection is reused only while
// it is silent: one that received bytes, a FIN or a RST while idle is
// closed on take and counted (Stats.Stale, TotalStale; see liveness.go).
type Pool struct {
	addr   string
	cfg    PoolConfig
	dialer net.Dialer

	mu     sync.Mutex
	idle   []*Conn
	closed bool

	open    atomic.Int64 // connections open (idle or in use)
	dials   atomic.Uint64
	reuses  atomic.Uint64
	expired atomic.Uint64
	stale   [numStaleReasons]atomic.Uint64
}

// NewPool returns an empty pool for addr (host:port).
func NewPool(addr string, cfg PoolConfig) *Pool {
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 2 * time.Second
	}
	if cfg.MaxIdle <= 0 {
		cfg.MaxIdle = 1024
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Second
	}
	p := &Pool{addr: addr, cfg: cfg}
	p.dialer.Timeout = cfg.ConnectTimeout
	p.dialer.SetMultipathTCP(false)
	if cfg.Limiter != nil {
		cfg.Limiter.add(p)
	}
	return p
}

// Addr is the endpoint address.
func (p *Pool) Addr() string { return p.addr }

// Stats are a pool's counters.
type Stats struct {
	Open, Idle            int
	Dials, Reuses, Expire uint64
	Stale                 StaleCounts // idle connections found unusable on take
}

// Stats returns the pool's counters.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	st := Stats{Open: int(p.open.Load()), Idle: idle, Dials: p.dials.Load(), Reuses: p.reuses.Load(), Expire: p.expired.Load()}
	for i := range p.stale {
		st.Stale[i] = p.stale[i].Load()
	}
	return st
}

// Totals are the counters of every pool of the process since it started,
// so that they outlive the pools a snapshot swap closes.
type Totals struct {
	Dials   uint64      // connections dialled
	Reuses  uint64      // requests sent on an idle connection
	Expired uint64      // idle connections closed for age instead of reused
	NotKept uint64      // healthy connections closed on release: the idle list was full (max_idle_per_endpoint) or the pool closed
	Stale   StaleCounts // idle connections found unusable on take, by reason (liveness.go)
}

var poolTotal struct {
	dials, reuses, expired, notKept atomic.Uint64
	stale                           [numStaleReasons]atomic.Uint64
}

// TotalCounts returns the process-wide pool counters.
func TotalCounts() Totals {
	t := Totals{Dials: poolTotal.dials.Load(), Reuses: poolTotal.reuses.Load(),
		Expired: poolTotal.expired.Load(), NotKept: poolTotal.notKept.Load()}
	for i := range poolTotal.stale {
		t.Stale[i] = poolTotal.stale[i].Load()
	}
	return t
}

// Get returns an idle connection used within maxIdleAge (any age when
// maxIdleAge is 0), or dials a new one that must connect before deadline
// and before ctx ends. Conn.Reused says which. With a Limiter at its limit
// it may wait for a connection (bounded) or fail with ErrTooManyConnections.
func (p *Pool) Get(ctx context.Context, deadline time.Time, maxIdleAge time.Duration) (*Conn, error) {
	if c := p.takeFresh(maxIdleAge); c != nil {
		return c, nil
	}
	if l := p.cfg.Limiter; l != nil {
		c, err := l.acquire(ctx, deadline, p)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
	}
	c, err := p.dial(ctx, deadline)
	if err != nil && p.cfg.Limiter != nil {
		p.cfg.Limiter.closed()
	}
	return c, err
}

// takeFresh pops the newest idle connection younger than maxIdleAge that
// is still silent (see stale), closing the others on the way.
func (p *Pool) takeFresh(maxIdleAge time.Duration) *Conn {
	now := time.Now()
	for {
		c := p.takeIdle()
		if c == nil {
			return nil
		}
		age := now.Sub(c.idleSince)
		if age > p.cfg.IdleTimeout || (maxIdleAge > 0 && age > maxIdleAge) {
			p.expired.Add(1)
			poolTotal.expired.Add(1)
			c.close()
			continue
		}
		if why, bad := c.stale(); bad {
			p.stale[why].Add(1)
			poolTotal.stale[why].Add(1)
			c.close()
			continue
		}
		c.Reused = true
		p.reuses.Add(1)
		poolTotal.reuses.Add(1)
		return c
	}
}

// takeIdle pops the newest idle connection.
func (p *Pool) takeIdle() *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	c := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return c
}

// takeOldestIdle pops the least recently used idle connection.
func (p *Pool) takeOldestIdle() *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return nil
	}
	c := p.idle[0]
	p.idle = append(p.idle[:0], p.idle[1:]...)
	return c
}

func (p *Pool) dial(ctx context.Context, deadline time.Time) (*Conn, error) {
	p.dials.Add(1)
	poolTotal.dials.Add(1)
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, &DialError{Addr: p.addr, Err: err}
	}
	p.open.Add(1)
	c := &Conn{
		nc:   nc,
		pool: p,
		br:   bufio.NewReaderSize(nc, 16<<10),
		bw:   bufio.NewWriterSize(nc, 16<<10),
	}
	c.probe.init(nc)
	return c, nil
}

// put returns a healthy connection to the idle list, or closes it.
func (p *Pool) put(c *Conn) {
	c.idleSince = time.Now()
	c.Reused = false
	p.mu.Lock()
	l := p.cfg.Limiter
	if !p.closed && len(p.idle) < p.cfg.MaxIdle && (l == nil || l.open.Load() <= l.maxConns.Load()) {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		if l != nil {
			l.signal()
		}
		return
	}
	p.mu.Unlock()
	poolTotal.notKept.Add(1)
	c.close()
}

// Close closes the idle connections and stops keeping any: connections in
// use are closed when released. Get still dials, so requests of an older
// snapshot that still use this pool complete.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	if p.cfg.Limiter != nil {
		p.cfg.Limiter.remove(p)
	}
	for _, c := range idle {
		c.close()
	}
}

// DialError is a failure to connect: the request was certainly not sent.
type DialError struct {
	Addr string
	Err  error
}

func (e *DialError) Error() string { return fmt.Sprintf("connect to upstream %s: %v", e.Addr, e.Err) }
func (e *DialError) Unwrap() error { return e.Err }

// Conn is one upstream connection, owned by a single request at a time.
type Conn struct {
	nc        net.Conn
	pool      *Pool
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
	// Reused is true when the connection served an earlier request; a
	// failure before any response byte on a reused connection may just be
	// the server having closed it while idle.
	Reused bool
	closed bool
	body   wire.Body
	probe  prober
}

// Body returns the connection's response body reader, set up for a response
// with head rh to a request with the given method. Trailers of a chunked
// body go to trailer when it is not nil. It is valid until Release or Close.
func (c *Conn) Body(method string, rh ResponseHead, trailer http.Header) *wire.Body {
	c.body.Reset(c.br, rh.Framing(method), rh.ContentLength, trailer, maxTrailerBytes)
	return &c.body
}

const maxTrailerBytes = 64 << 10

// Reader and Writer give the connection's buffered streams.
func (c *Conn) Reader() *bufio.Reader { return c.br }
func (c *Conn) Writer() *bufio.Writer { return c.bw }

// NetConn is the underlying connection, for a protocol upgrade that takes
// it over (the caller then closes the Conn when done).
func (c *Conn) NetConn() net.Conn { return c.nc }

// SetDeadline bounds every later read and write.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// Release gives the connection back to its pool when reusable is true (the
// whole response was read and neither side asked to close), else closes it.
func (c *Conn) Release(reusable bool) {
	if c.closed {
		return
	}
	if !reusable {
		c.close()
		return
	}
	if c.br.Buffered() != 0 { // bytes behind a complete response: never pooled
		c.pool.stale[StaleUnsolicited].Add(1)
		poolTotal.stale[StaleUnsolicited].Add(1)
		c.close()
		return
	}
	c.pool.put(c) // its deadline is stale, and the next user sets a new one
}

// Answered waits until the upstream has sent a first response byte, for
// at most wait (but not past deadline, the connection's deadline), and
// reports whether one came. A false answer means "still waiting": any other
// outcome, errors included, is left for the next read to see.
func (c *Conn) Answered(wait time.Duration, deadline time.Time) bool {
	if c.br.Buffered() > 0 {
		return true
	}
	t := time.Now().Add(wait)
	if !t.Before(deadline) {
		return true
	}
	// Give way to the goroutines ready to run first: under load the answer
	// usually arrives meanwhile, and Peek's read(2) then finds it instead of
	// failing with EAGAIN and parking in the poller (one syscall and one
	// wake-up fewer). When nothing else is ready, Gosched returns at once.
	runtime.Gosched()
	_ = c.nc.SetReadDeadline(t)
	// Peek tries read(2) before it waits, so a silent upstream costs one
	// EAGAIN read. Waiting in the poller first (RawConn.Read with a callback
	// that declines its first call) does not work: the poller forgets a
	// readiness that came before the wait began, and an answer already in
	// the socket then waits out the whole quickAnswer. TestAnswered's
	// "fast" case is that answer.
	_, err := c.br.Peek(1)
	_ = c.nc.SetReadDeadline(deadline)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// Interrupt makes a read or write in progress fail at once. It is safe to
// call from another goroutine (for example when the client goes away); the
// owner then sees a timeout error and closes the connection.
func (c *Conn) Interrupt() { _ = c.nc.SetDeadline(time.Unix(1, 0)) }

// Close closes the connection; the owner calls it after a failure.
func (c *Conn) Close() { c.close() }

func (c *Conn) close() {
	if c.closed {
		return
	}
	c.closed = true
	c.pool.open.Add(-1)
	_ = c.nc.Close()
	if l := c.pool.cfg.Limiter; l != nil {
		l.closed()
	}
}
