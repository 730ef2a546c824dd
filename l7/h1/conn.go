package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/wire"
)

// Connection states, for Shutdown.
const (
	stateIdle int32 = iota // waiting for a request; Shutdown may close it
	stateActive
	stateClosing
)

type conn struct {
	s      *Server
	nc     net.Conn
	cr     connReader
	br     *bufio.Reader
	bw     *bufio.Writer
	state  atomic.Int32
	remote string
	tls    *tls.ConnectionState

	req  *http.Request
	hdr  http.Header
	vals []string // backing array of single header values
	url  url.URL
	body requestBody
	w    response

	ctx      reqContext
	watch    watcher
	hijacked bool // the handler took the connection (protocol upgrade)

	served atomic.Bool // a request was read on this connection

	bodyDeadline bool // each read of the connection is bounded by BodyReadTimeout
	bodyTimedOut bool // this request's body stalled past its deadline
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, remote: nc.RemoteAddr().String(), hdr: make(http.Header)}
	c.cr.c = c
	c.takeBuffers()
	c.ctx.c = c
	c.ctx.parent = s.BaseContext
	if c.ctx.parent == nil {
		c.ctx.parent = context.Background()
	}
	c.watch.done = make(chan struct{})
	if tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	req, _ := http.NewRequestWithContext(&c.ctx, "GET", "/", nil)
	c.req = req
	c.body.c = c
	c.w.c = c
	c.w.hdr = make(http.Header) // no size hint: maps grow to the requests seen (an idle connection keeps them)
	return c
}

func (c *conn) serve() {
	defer func() {
		if !c.hijacked {
			c.close()
			c.releaseBuffers() // only here: this goroutine is the last to use them
		}
	}()
	for {
		if !c.awaitRequest() {
			return
		}
		keep := c.serveRequest()
		c.state.Store(stateIdle)
		if !keep || c.s.shutting.Load() {
			return
		}
	}
}

// Read and write buffers are pooled: an idle keep-alive TLS connection
// holds none of them (idleRead), which is most of what it would cost
// (16 + 4 KiB of the ~56 KiB per idle connection perf/idle.sh measured).
var (
	readBufs  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4<<10) }}
)

// idleWaits counts idleRead's waits without buffers (tests).
var idleWaits atomic.Uint64

func (c *conn) takeBuffers() {
	c.br = readBufs.Get().(*bufio.Reader)
	c.br.Reset(&c.cr)
	c.bw = writeBufs.Get().(*bufio.Writer)
	c.bw.Reset(c.nc)
}

func (c *conn) releaseBuffers() {
	if c.br == nil {
		return
	}
	c.br.Reset(nil)
	c.bw.Reset(nil)
	readBufs.Put(c.br)
	writeBufs.Put(c.bw)
	c.br, c.bw = nil, nil
}

// idleRead waits for the first byte of the next request with the buffers
// back in their pools. It reads one byte straight from the connection,
// kept as the watcher's saved byte, which connReader hands out first.
// Only for TLS: crypto/tls reads the whole record from the socket either
// way, so the one-byte read costs no extra system call (on plain TCP it
// would, and a plain listener keeps its buffers).
func (c *conn) idleRead() error {
	if c.br.Buffered() != 0 || c.bw.Buffered() != 0 {
		return nil
	}
	c.releaseBuffers()
	idleWaits.Add(1)
	_, err := io.ReadFull(c.nc, c.watch.byte[:])
	c.takeBuffers()
	if err != nil {
		return err
	}
	c.watch.saved = true
	return nil
}

func (c *conn) close() {
	c.state.Store(stateClosing)
	c.watch.goneOnce.Do(func() { close(c.watch.done) })
	_ = c.nc.Close()
}

// FreshConnGrace is how long, once Shutdown began, a connection that has
// not sent its first request yet gets to send it (bounded by the
// read-header timeout when that is shorter). Such a connection was accepted
// just before the listener closed (during a graceful re-exec, the next
// process accepts the ones after): closing it at once would fail a request
// the client already sent, with nothing to retry on a fresh connection.
const FreshConnGrace = 2 * time.Second

func (c *conn) freshGrace() time.Duration {
	if rt := c.s.ReadHeaderTimeout; rt > 0 && rt < FreshConnGrace {
		return rt
	}
	return FreshConnGrace
}

// interruptIfIdle closes the connection if it is waiting for a request; one
// that has served none gets FreshConnGrace for its first.
func (c *conn) interruptIfIdle() {
	if !c.served.Load() {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.freshGrace()))
		return
	}
	if c.state.CompareAndSwap(stateIdle, stateClosing) {
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// awaitRequest waits for the first byte of a request within the idle
// timeout, then bounds the rest of the head by the read-header timeout
// (unless the whole head is already buffered, the common case).
func (c *conn) awaitRequest() bool {
	if c.br.Buffered() == 0 {
		// Give way to the goroutines ready to run before reading: under load
		// the client's next request usually arrives meanwhile, and the read
		// finds it instead of failing with EAGAIN and parking in the poller.
		// With nothing else ready, Gosched returns at once.
		runtime.Gosched()
		switch fresh := !c.served.Load(); {
		case fresh && c.s.shutting.Load():
			_ = c.nc.SetReadDeadline(time.Now().Add(c.freshGrace()))
		case c.s.IdleTimeout > 0:
			_ = c.nc.SetReadDeadline(time.Now().Add(c.s.IdleTimeout))
		}
		if c.tls != nil && !c.watch.saved {
			if err := c.idleRead(); err != nil {
				return false
			}
		}
		if _, err := c.br.Peek(1); err != nil {
			return false
		}
	}
	if !c.state.CompareAndSwap(stateIdle, stateActive) {
		return false // shutting down
	}
	c.served.Store(true)
	if c.s.ReadHeaderTimeout > 0 {
		buf, _ := c.br.Peek(c.br.Buffered())
		if !bytes.Contains(buf, []byte("\r\n\r\n")) {
			_ = c.nc.SetReadDeadline(time.Now().Add(c.s.ReadHeaderTimeout))
		}
	}
	return true
}

// serveRequest reads one request, runs the handler and finishes the
// response. It reports whether the connection may serve another request.
func (c *conn) serveRequest() (keep bool) {
	perr := c.readRequest()
	if perr != nil {
		if !errors.Is(perr.err, io.EOF) && !isTimeout(perr.err) {
			c.s.rejected(c.remote, perr.status, perr.reason)
			c.writeError(perr.status, perr.reason)
		}
		return false
	}
	c.bodyTimedOut = false
	if c.req.Body != http.NoBody {
		// The handler reads the body: lift the head's deadline; every read
		// of the body gets its own (BodyReadTimeout) in connReader.
		_ = c.nc.SetReadDeadline(time.Time{})
		c.bodyDeadline = c.s.BodyReadTimeout > 0
	}
	c.w.reset(c.req)
	defer func() {
		if p := recover(); p != nil {
			keep = false
			c.watch.stop(c)
			if p != http.ErrAbortHandler {
				c.s.logger().Error("handler panic", "panic", p, "method", c.req.Method, "uri", c.req.RequestURI)
			}
		}
	}()
	c.watch.begin()
	c.s.Handler.ServeHTTP(&c.w, c.req)
	c.watch.stop(c)
	if c.hijacked {
		return false
	}
	return c.finish()
}

// maxDrain is how much of a request body the handler left unread the
// server reads and discards to keep the connection, within drainTime (or
// BodyReadTimeout when shorter), after the response went out.
const (
	maxDrain  = 256 << 10
	drainTime = time.Second
)

// bodyTooBigToDrain reports, before the response head goes out, that the
// connection will close because too much of the body is left.
func (c *conn) bodyTooBigToDrain() bool {
	r := c.req
	return r.ContentLength > 0 && !c.body.b.Done() && r.ContentLength-c.body.b.Consumed() > maxDrain
}

// finish completes and sends the response, then drains what is left of
// the request body within a byte and a time budget, reporting whether the
// connection stays open. A body the client has not sent yet (it waits for
// 100 Continue) is not waited for: the connection closes.
func (c *conn) finish() bool {
	c.noteBodyTimeout()
	c.w.finish()
	keep := !c.w.closeAfter && !c.req.Close && !c.watch.gone()
	err := c.bw.Flush()
	if err == nil && !c.body.b.Done() {
		if keep && !c.body.expect {
			c.drain()
			c.noteBodyTimeout()
		}
		if !c.body.b.Done() {
			keep = false
			c.lingerClose()
		}
	}
	c.bodyDeadline = false
	return keep && err == nil
}

// noteBodyTimeout tells the server, once per request, that the body stalled.
func (c *conn) noteBodyTimeout() {
	if c.bodyTimedOut {
		c.bodyTimedOut = false
		if c.s.BodyTimedOut != nil {
			c.s.BodyTimedOut()
		}
	}
}

// drain discards the unread rest of the request body, up to maxDrain bytes
// and for at most drainTime (BodyReadTimeout when shorter).
func (c *conn) drain() {
	d := drainTime
	if t := c.s.BodyReadTimeout; t > 0 && t < d {
		d = t
	}
	c.bodyDeadline = false
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.CopyN(io.Discard, &c.body.b, maxDrain+1)
	if isTimeout(err) {
		c.bodyTimedOut = true
	}
	_ = c.nc.SetReadDeadline(time.Time{})
}

// lingerClose ends a connection whose client may still be sending a body
// the server will not read: closing at once would make the kernel answer
// with a reset that can destroy the response before the client reads it.
// So: send FIN, discard what arrives for a short while, then close.
func (c *conn) lingerClose() {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.nc.(closeWriter); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c.nc, 4<<20)
}

// parseError is a request the server refuses itself.
type parseError struct {
	status int
	reason string
	err    error
}

func refuse(status int, reason string) *parseError {
	return &parseError{status: status, reason: reason}
}

var (
	chunkedTE = []string{"chunked"}
	proto11   = "HTTP/1.1"
	proto10   = "HTTP/1.0"
)

// readRequest parses a request head into c.req.
func (c *conn) readRequest() *parseError {
	budget := c.s.MaxHeaderBytes
	if budget <= 0 {
		budget = 1 << 20
	}
	line, err := wire.ReadLine(c.br, &budget)
	if err == nil && len(line) == 0 { // one empty line before a request is tolerated
		line, err = wire.ReadLine(c.br, &budget)
	}
	if err != nil {
		return headError(err)
	}
	r := c.req
	c.resetRequest()
	if perr := parseRequestLine(line, r, &c.url); perr != nil {
		return perr
	}
	var f framing
	for {
		line, err = wire.ReadLine(c.br, &budget)
		if err != nil {
			return headError(err)
		}
		if len(line) == 0 {
			break
		}
		if perr := f.field(line, c.hdr, &c.vals); perr != nil {
			return perr
		}
	}
	return c.applyFraming(r, &f)
}

// resetRequest clears the connection's request for reuse, field by field,
// so its context (set once, unexported) survives.
func (c *conn) resetRequest() {
	r := c.req
	clear(c.hdr)
	clear(c.vals)
	c.vals = c.vals[:0]
	c.url = url.URL{}
	r.Method, r.URL, r.Proto, r.ProtoMajor, r.ProtoMinor = "", &c.url, "", 0, 0
	r.Header, r.Body, r.GetBody, r.ContentLength, r.TransferEncoding = c.hdr, http.NoBody, nil, 0, nil
	r.Close, r.Host, r.Form, r.PostForm, r.MultipartForm, r.Trailer = false, "", nil, nil, nil, nil
	r.RemoteAddr, r.RequestURI, r.TLS, r.Response, r.Pattern = c.remote, "", c.tls, nil, ""
	c.watch.bodyDone.Store(true)
}

func headError(err error) *parseError {
	switch {
	case errors.Is(err, wire.ErrLineTooLong), errors.Is(err, wire.ErrHeadTooLarge):
		return &parseError{status: http.StatusRequestHeaderFieldsTooLarge, reason: "request header too large", err: err}
	case errors.Is(err, wire.ErrMalformed):
		return &parseError{status: http.StatusBadRequest, reason: strings.TrimPrefix(err.Error(), wire.ErrMalformed.Error()+": "), err: err}
	}
	return &parseError{err: err}
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// connReader feeds the bufio.Reader: first any byte the client watcher
// read, then the connection. While a request body is read, each read of
// the connection must complete within BodyReadTimeout.
type connReader struct {
	c *conn
}

func (r *connReader) Read(p []byte) (int, error) {
	c := r.c
	w := &c.watch
	if w.saved {
		w.saved = false
		p[0] = w.byte[0]
		return 1, nil
	}
	if !c.bodyDeadline {
		return c.nc.Read(p)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.BodyReadTimeout))
	n, err := c.nc.Read(p)
	if err != nil && isTimeout(err) {
		c.bodyTimedOut = true
	}
	return n, err
}

// watcher notices a client that goes away while its request is in the
// handler, by reading the connection in the background; it only starts
// when a handler asks for the request context's Done channel.
type watcher struct {
	mu       sync.Mutex
	active   bool // a handler is running: only then may a read start
	running  bool
	finished chan struct{}
	byte     [1]byte
	saved    bool // byte holds the first byte of the next request
	done     chan struct{}
	goneOnce sync.Once
	bodyDone atomic.Bool // the request body was read to its end
}

func (w *watcher) gone() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *watcher) begin() {
	w.mu.Lock()
	w.active = true
	w.mu.Unlock()
}

// start begins the background read unless no handler runs (Done may be
// called late, from another goroutine), it would steal request body bytes,
// or the client already sent more.
func (w *watcher) start(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.active || w.running || w.gone() || !w.bodyDone.Load() || c.br.Buffered() > 0 {
		return
	}
	w.running = true
	w.finished = make(chan struct{})
	go func() {
		defer close(w.finished)
		n, err := c.nc.Read(w.byte[:])
		if n == 1 {
			w.saved = true
			return
		}
		if err != nil && !isTimeout(err) {
			w.goneOnce.Do(func() { close(w.done) })
		}
	}()
}

// stop ends a background read, keeping a byte it may have read.
func (w *watcher) stop(c *conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active = false
	if !w.running {
		return
	}
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
	<-w.finished
	_ = c.nc.SetReadDeadline(time.Time{})
	w.running = false
}

// reqContext is every request's context on one connection: Done closes
// when the client goes away (or the connection ends).
type reqContext struct {
	c      *conn
	parent context.Context
}

func (x *reqContext) Deadline() (time.Time, bool) { return x.parent.Deadline() }
func (x *reqContext) Value(key any) any           { return x.parent.Value(key) }

func (x *reqContext) Done() <-chan struct{} {
	x.c.watch.start(x.c)
	return x.c.watch.done
}

func (x *reqContext) Err() error {
	if x.c.watch.gone() {
		return context.Canceled
	}
	return x.parent.Err()
}
