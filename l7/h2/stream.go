package h2

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// errStreamReset is a request body's or response write's error after the
// stream was reset (by the client, or by the server: local).
type errStreamReset struct {
	code  http2.ErrCode
	local bool
}

func (e errStreamReset) Error() string {
	if e.local {
		return "h2: stream reset by the server: " + e.code.String()
	}
	return "h2: stream reset by the client: " + e.code.String()
}

// ErrBodyClosed is what a request body's Read returns after Close.
var ErrBodyClosed = errors.New("h2: request body closed")

type stream struct {
	c  *conn
	id uint32

	// guarded by c.mu
	remoteClosed bool  // END_STREAM received
	reset        bool  // RST_STREAM sent or received
	handlerDone  bool  // the handler returned and the response ended
	declLen      int64 // request Content-Length; -1: none
	gotLen       int64
	recvWindow   int32 // request body bytes the client may still send
	recvUnacked  int32 // read by the handler, not yet given back
	sendWindow   int64
	body         []byte
	bodyOff      int
	bodyErr      error
	bodyClosed   bool
	bodyCond     sync.Cond

	needsContinue bool
	refusal       int // answered with this status without the handler
	refusalMsg    string

	// ctx stays with the stream on reuse, its parent untouched: a copy of
	// the request made with context.WithoutCancel (the cache's background
	// refresh) may still read it.
	ctx  *streamCtx
	req  http.Request
	tmpl http.Request // req as made: its context set, the rest zero (for reuse)
	url  url.URL
	hdr  http.Header
	rb   requestBody
	w    responseWriter

	hadBody  bool // the request had a body: its reader may outlive the handler
	panicked bool
}

// newStream makes a stream's state.
func newStream(c *conn, id uint32) *stream {
	st := &stream{c: c, id: id, hdr: make(http.Header, 8), ctx: &streamCtx{parent: c.ctx}}
	st.w.hdr = make(http.Header, 8)
	st.init()
	st.tmpl = http.Request{Proto: "HTTP/2.0", ProtoMajor: 2, Header: st.hdr}
	st.tmpl = *st.tmpl.WithContext(st.ctx)
	st.req = st.tmpl
	return st
}

func (st *stream) init() {
	c := st.c
	st.rb.st = st
	st.w.st = st
	st.bodyCond.L = &c.mu
	st.recvWindow = c.cfg.streamWindow
	st.sendWindow = int64(c.peerInitWindow)
	st.declLen = -1
}

// maxFree bounds the finished streams a connection keeps for reuse.
const maxFree = 16

// newStreamLocked takes a stream a finished request left, or makes one.
// Reuse saves the stream's allocations (its struct, request, URL and two
// header maps: ~1 KB a request on BenchmarkServeRaw); it is safe as
// l7/h1's reuse of its request is: nothing may keep a request, its
// headers or its ResponseWriter past ServeHTTP (net/http's rule), and a
// request with a body is never reused, since its reader may (c.mu held).
func (c *conn) newStreamLocked(id uint32) *stream {
	n := len(c.free)
	if n == 0 {
		return newStream(c, id)
	}
	st := c.free[n-1]
	c.free[n-1] = nil
	c.free = c.free[:n-1]
	hdr, whdr, buf, tmpl, ctx := st.hdr, st.w.hdr, st.w.buf[:0], st.tmpl, st.ctx
	clear(hdr)
	clear(whdr)
	ctx.reset()
	*st = stream{c: c, id: id, hdr: hdr, tmpl: tmpl, req: tmpl, ctx: ctx}
	st.w.hdr, st.w.buf = whdr, buf
	st.init()
	return st
}

// recycleLocked keeps a stream whose handler returned for the next one,
// when nothing else can hold it (c.mu held).
func (c *conn) recycleLocked(st *stream) {
	if st.hadBody || st.panicked || len(c.free) >= maxFree || c.streams[st.id] == st || cap(st.w.buf) > 2*bufSize {
		return
	}
	c.free = append(c.free, st)
}

// release cancels a finished stream's context.
func (st *stream) release() {
	st.ctx.cancel()
}

// abort ends the stream's request body (unless complete) and writes with
// err (c.mu held).
func (st *stream) abort(err error) {
	if st.bodyErr == nil {
		st.bodyErr = err
	}
	st.w.err = err
	st.w.failed.Store(true)
	st.bodyCond.Broadcast()
	st.ctx.cancel()
}

func (st *stream) bodyUnread() int { return len(st.body) - st.bodyOff }

// run serves the stream on a worker goroutine.
func (st *stream) run() {
	c := st.c
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.logger().Error("h2: handler panic", "remote", c.remote, "path", st.req.URL.Path,
					"panic", fmt.Sprint(p), "stack", string(buf))
			}
			c.mu.Lock()
			st.panicked = true
			c.resetLocked(st.id, http2.ErrCodeInternal)
			st.finishLocked()
			c.mu.Unlock()
		}
	}()
	if st.refusal != 0 {
		st.w.hdr["Content-Type"] = []string{"text/plain; charset=utf-8"}
		st.w.hdr["X-Content-Type-Options"] = []string{"nosniff"}
		st.w.WriteHeader(st.refusal)
		_, _ = st.w.Write([]byte(st.refusalMsg + "\n"))
	} else {
		c.s.Handler.ServeHTTP(&st.w, &st.req)
	}
	c.mu.Lock()
	st.w.finishLocked()
	st.finishLocked()
	c.mu.Unlock()
}

// finishLocked marks the handler done: the body is closed, a stream whose
// request is still open is reset with NO_ERROR (as x/net does), and the
// stream is forgotten once both sides are done.
func (st *stream) finishLocked() {
	c := st.c
	if st.handlerDone {
		return
	}
	st.handlerDone = true
	st.closeBodyLocked()
	if !st.remoteClosed && !st.reset {
		_ = c.fw.WriteRSTStream(st.id, http2.ErrCodeNo)
		st.reset = true
	}
	c.flushSoonLocked()
	st.ctx.cancel()
	c.maybeCloseLocked(st)
	st.release()
}

func (st *stream) closeBodyLocked() {
	if st.bodyClosed {
		return
	}
	st.bodyClosed = true
	if n := st.bodyUnread(); n > 0 {
		st.c.giveBackLocked(int32(n))
	}
	st.body, st.bodyOff = st.body[:0], 0
	st.bodyCond.Broadcast()
}

// requestBody is the handler's view of the request's DATA frames.
type requestBody struct{ st *stream }

func (b *requestBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	st := b.st
	c := st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.needsContinue {
		st.needsContinue = false
		if !st.reset && !c.closed && !st.w.sentHeader {
			c.writeHeadersLocked(st.id, 100, nil, false, false)
			c.flushSoonLocked()
		}
	}
	for st.bodyUnread() == 0 && st.bodyErr == nil && !st.bodyClosed {
		st.bodyCond.Wait()
	}
	if st.bodyClosed {
		return 0, ErrBodyClosed
	}
	if st.bodyUnread() == 0 {
		return 0, st.bodyErr
	}
	n := copy(p, st.body[st.bodyOff:])
	st.bodyOff += n
	if st.bodyOff == len(st.body) {
		st.body, st.bodyOff = st.body[:0], 0
	}
	c.recvUnacked += int32(n)
	c.ackConnLocked()
	if !st.remoteClosed && !st.reset {
		st.recvUnacked += int32(n)
		if st.recvUnacked >= c.cfg.streamWindow/2 {
			_ = c.fw.WriteWindowUpdate(st.id, uint32(st.recvUnacked))
			st.recvWindow += st.recvUnacked
			st.recvUnacked = 0
		}
	}
	c.flushSoonLocked()
	return n, nil
}

// Close drops what the client sends next on this stream.
func (b *requestBody) Close() error {
	c := b.st.c
	c.mu.Lock()
	b.st.closeBodyLocked()
	c.flushSoonLocked()
	c.mu.Unlock()
	return nil
}

// responseWriter buffers a response's head and first bytes so a short
// response leaves as one HEADERS and one DATA frame in one write.
type responseWriter struct {
	st          *stream
	hdr         http.Header
	status      int
	wroteHeader bool // WriteHeader called (final status)
	sentHeader  bool // HEADERS sent
	buf         []byte
	written     int64
	declLen     int64       // Content-Length the handler set; -1: none
	err         error       // guarded by c.mu
	failed      atomic.Bool // err is set: for the unlocked paths
	noBody      bool        // HEAD, 204, 304
	cl, date    [1]string   // backing of the Content-Length and Date values it adds
}

var lengthTexts = func() (t [1025]string) {
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return
}()

func lengthText(n int) string {
	if n < len(lengthTexts) {
		return lengthTexts[n]
	}
	return strconv.Itoa(n)
}

// failure is w.err, read under the connection lock.
func (w *responseWriter) failure() error {
	c := w.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.err
}

// bufSize is how much body a response buffers before it sends DATA.
const bufSize = 8 << 10

func (w *responseWriter) Header() http.Header { return w.hdr }

func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if w.wroteHeader {
		return
	}
	st := w.st
	if code < 200 && code != http.StatusSwitchingProtocols {
		c := st.c
		c.mu.Lock()
		if w.err == nil && !c.closed {
			c.writeHeadersLocked(st.id, code, w.hdr, false, false)
			c.flushSoonLocked()
		}
		c.mu.Unlock()
		return
	}
	w.wroteHeader = true
	w.status = code
	w.declLen = -1
	if cl := w.hdr["Content-Length"]; len(cl) > 0 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			w.declLen = n
		} else {
			delete(w.hdr, "Content-Length")
		}
	}
	w.noBody = st.req.Method == "HEAD" || code == 204 || code == 304
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		if w.st.req.Method == "HEAD" {
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if w.declLen >= 0 && w.written+int64(len(p)) > w.declLen {
		return 0, http.ErrContentLength
	}
	if w.failed.Load() {
		return 0, w.failure()
	}
	w.written += int64(len(p))
	if len(w.buf)+len(p) <= bufSize {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	c := w.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := w.sendLocked(p, false); err != nil {
		return 0, err
	}
	c.flushSoonLocked()
	return len(p), nil
}

// WriteString avoids a copy for io.WriteString callers.
func (w *responseWriter) WriteString(s string) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(w.buf)+len(s) <= bufSize && w.wroteHeader && !w.noBody && !w.failed.Load() &&
		(w.declLen < 0 || w.written+int64(len(s)) <= w.declLen) {
		w.written += int64(len(s))
		w.buf = append(w.buf, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// Flush sends the head and the body buffered so far.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with the write's error.
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	c := w.st.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := w.sendLocked(nil, false); err != nil {
		return err
	}
	c.flushSoonLocked()
	return c.werr
}

// SetReadDeadline and SetWriteDeadline are for http.ResponseController;
// HTTP/2 streams have none here (the listener bounds body reads itself).
func (w *responseWriter) SetReadDeadline(time.Time) error  { return http.ErrNotSupported }
func (w *responseWriter) SetWriteDeadline(time.Time) error { return http.ErrNotSupported }

// sendLocked sends the head if not yet sent, the buffered bytes, then p.
func (w *responseWriter) sendLocked(p []byte, end bool) error {
	st := w.st
	c := st.c
	if w.err != nil {
		return w.err
	}
	if c.closed {
		return errConnClosed
	}
	trailers := w.trailerKeys()
	if !w.sentHeader {
		w.sentHeader = true
		h := w.hdr
		if end && len(trailers) == 0 && w.declLen < 0 && !w.noBody && len(p) == 0 {
			w.cl[0] = lengthText(len(w.buf))
			h["Content-Length"] = w.cl[:]
		}
		if _, ok := h["Date"]; !ok {
			w.date[0] = currentDate()
			h["Date"] = w.date[:]
		}
		headEnd := end && len(trailers) == 0 && (w.noBody || len(w.buf)+len(p) == 0)
		c.writeHeadersLocked(st.id, w.status, h, headEnd, false, trailers...)
		if headEnd {
			return nil
		}
	}
	if w.noBody {
		w.buf = w.buf[:0]
		p = nil
	}
	dataEnd := end && len(trailers) == 0
	if len(w.buf) > 0 {
		last := len(p) == 0
		if err := w.dataLocked(w.buf, dataEnd && last); err != nil {
			return err
		}
		w.buf = w.buf[:0]
		if dataEnd && last {
			return nil
		}
	}
	if len(p) > 0 || dataEnd {
		if err := w.dataLocked(p, dataEnd); err != nil {
			return err
		}
	}
	if end && len(trailers) > 0 {
		th := make(http.Header, len(trailers))
		for _, k := range trailers {
			if vv, ok := w.hdr[k]; ok {
				th[strings.TrimPrefix(k, http.TrailerPrefix)] = vv
			}
		}
		c.writeHeadersLocked(st.id, 0, th, true, true)
	}
	return nil
}

// trailerKeys lists the header keys sent as trailers: names declared in
// Trailer, and keys with http.TrailerPrefix.
func (w *responseWriter) trailerKeys() []string {
	var keys []string
	for _, v := range w.hdr["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = textprotoTrim(k); k != "" {
				keys = append(keys, http.CanonicalHeaderKey(k))
			}
		}
	}
	for k := range w.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			keys = append(keys, k)
		}
	}
	return keys
}

func textprotoTrim(s string) string { return strings.TrimSpace(s) }

// dataLocked sends p as DATA frames within the flow-control windows,
// waiting for them (up to StallTimeout, then the connection closes).
func (w *responseWriter) dataLocked(p []byte, end bool) error {
	st := w.st
	c := st.c
	var deadline time.Time
	for {
		if w.err != nil {
			return w.err
		}
		if c.closed {
			return errConnClosed
		}
		if len(p) == 0 {
			if end {
				_ = c.fw.WriteData(st.id, true, nil)
			}
			return nil
		}
		n := min(int64(len(p)), int64(c.peerMaxFrame), st.sendWindow, c.sendWindow)
		if n <= 0 || (len(c.out.b) > maxBuffered && c.flushing) {
			if deadline.IsZero() {
				deadline = time.Now().Add(c.cfg.stall)
			}
			if err := c.waitLocked(deadline); err != nil {
				return err
			}
			continue
		}
		last := int(n) == len(p)
		_ = c.fw.WriteData(st.id, end && last, p[:n])
		c.dataSent = min(c.dataSent+2, 1<<20) // one update for the stream, one for the connection
		st.sendWindow -= n
		c.sendWindow -= n
		deadline = time.Time{}
		p = p[n:]
		if len(c.out.b) >= maxBuffered {
			c.flushLocked()
		}
		if last {
			return nil
		}
	}
}

// waitLocked waits for a window update or drained output, up to
// StallTimeout; past it the client is stalling the connection.
func (c *conn) waitLocked(deadline time.Time) error {
	if c.flushLocked() {
		return nil // the lock was let go: windows may have changed, look again
	}
	stalled := !time.Now().Before(deadline)
	t := time.AfterFunc(time.Until(deadline), func() {
		c.mu.Lock()
		stalled = true
		c.flowCond.Broadcast()
		c.mu.Unlock()
	})
	if !stalled {
		c.flowCond.Wait()
	}
	t.Stop()
	if stalled {
		if !c.closed {
			c.closed = true
			if c.s.Abuse != nil {
				c.s.Abuse(c.remote, "zero_window")
			}
			_ = c.nc.Close()
		}
		return errConnClosed
	}
	return nil
}

// finishLocked ends the response after the handler returned.
func (w *responseWriter) finishLocked() {
	if !w.wroteHeader {
		w.WriteHeaderLocked(http.StatusOK)
	}
	if w.err != nil || w.st.reset {
		return
	}
	_ = w.sendLocked(nil, true)
}

// WriteHeaderLocked is WriteHeader for a final status without the lock.
func (w *responseWriter) WriteHeaderLocked(code int) {
	w.wroteHeader = true
	w.status = code
	w.declLen = -1
	if cl := w.hdr["Content-Length"]; len(cl) > 0 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			w.declLen = n
		}
	}
	w.noBody = w.st.req.Method == "HEAD" || code == 204 || code == 304
}

// writeHeadersLocked encodes and queues a HEADERS frame (and CONTINUATION
// frames past the client's frame size). status 0: trailers.
func (c *conn) writeHeadersLocked(id uint32, status int, h http.Header, end, trailers bool, skip ...string) {
	c.enc.begin()
	if !trailers {
		c.enc.status(status)
	}
	for k, vv := range h {
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer":
			if k != "Trailer" || trailers {
				continue
			}
		}
		if strings.HasPrefix(k, http.TrailerPrefix) || len(skip) > 0 && slices.Contains(skip, k) {
			continue
		}
		wn, ok := wireNameOf(k)
		if !ok || !validWireName(wn.name) {
			continue
		}
		for _, v := range vv {
			if !validFieldValue(v) {
				continue
			}
			c.enc.field(wn.name, wn.static, v)
		}
	}
	b := c.enc.buf
	max := int(c.peerMaxFrame)
	first := min(len(b), max)
	_ = c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:first],
		EndStream: end, EndHeaders: first == len(b)})
	for b = b[first:]; len(b) > 0; {
		n := min(len(b), max)
		_ = c.fw.WriteContinuation(id, n == len(b), b[:n])
		b = b[n:]
	}
}

var statusTexts = func() (t [600]string) {
	for i := 100; i < 600; i++ {
		t[i] = strconv.Itoa(i)
	}
	return
}()

func statusText(code int) string {
	if code >= 100 && code < 600 {
		return statusTexts[code]
	}
	return strconv.Itoa(code)
}
