package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/listener"
	"github.com/rampart-edge/rampart/l7/stage"
	"github.com/rampart-edge/rampart/l7/upstream"
)

const (
	maxResponseHead = 64 << 10
	retryDrainBytes = 64 << 10
	// staleAge: a request whose body cannot be replayed only takes an idle
	// connection used this recently, so a server's idle close is unlikely
	// to cost the request.
	staleAge = 2 * time.Second
	// quickAnswer: how long an upstream may take to start its answer before
	// the proxy starts watching for the client going away.
	quickAnswer = 20 * time.Millisecond
)

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// forwardStage is the last stage of every route's chain: it sends the
// request upstream (admission, the request body, an endpoint pick per
// attempt within the exchange's Regions, retries) and streams the answer
// back. It always replies.
type forwardStage struct {
	p  *Proxy
	rr *routeRT
}

func (*forwardStage) Name() string { return "forward" }

func (s *forwardStage) Serve(x *stage.Exchange) stage.Verdict {
	f := forwardings.Get().(*forwarding)
	*f = forwarding{p: s.p, w: x.W, r: x.R, rr: s.rr, cl: x.Cluster, regions: x.Regions, path: x.Path, query: x.Query,
		reqID: x.Log.ReqID, deadline: x.Log.Start.Add(s.rr.timeout), maxBody: -1, log: x.Log}
	if l := x.Listener; l != nil {
		f.maxBody = l.MaxBodyBytes
		f.tunnelIdle = time.Duration(l.TunnelIdleTimeoutMs) * time.Millisecond
	}
	f.run()
	x.Fault, x.Abort = f.fault, f.abort
	*f = forwarding{} // nothing holds it now: every goroutine and callback of a trip ends with run
	forwardings.Put(f)
	return stage.Replied
}

// forwardings are pooled: a request's forwarding escapes to the heap
// (426 bytes a request otherwise).
var forwardings = sync.Pool{New: func() any { return new(forwarding) }}

// forwarding is one request's trip upstream, with its retries.
type forwarding struct {
	p            *Proxy
	w            http.ResponseWriter
	r            *http.Request
	rr           *routeRT
	cl           *cluster.Cluster
	regions      cluster.Filter // the endpoints a pick may choose (nil: any)
	path         string
	query        string
	reqID        string
	deadline     time.Time
	maxBody      int64
	log          *accesslog.Entry
	abort        bool // the response must be cut off (its head was already sent)
	body         io.Reader
	clientBody   clientBody // f.body's innermost reader: how reading the client failed
	hasBody      bool
	bodyLen      int64  // body length sent upstream; -1: chunked
	bodyReadOK   bool   // no byte of the request body has been consumed yet
	replay       []byte // the whole body, kept so the request can be retried
	replayBuf    *[]byte
	eligible     bool // safe to repeat: GET/HEAD/OPTIONS, or carries its idempotency key
	attempt      int
	retries      int
	wait         time.Duration // backoff before the next attempt
	fault        string        // whose fault a failure is: gateway, upstream
	preset       presetKeys    // response header keys set before the proxy ran (kept on reset)
	admitted     uint8
	upgrade      string        // the protocol a client asks to upgrade to (WebSocket)
	tunnelIdle   time.Duration // an upgraded connection idle this long is closed (0: never)
	releaseRetry []func()
}

// outcome of one attempt.
type outcome uint8

const (
	served     outcome = iota // a response (or an error reply) went to the client
	retryStale                // a reused connection failed before any response byte
	retryDial                 // connecting failed: nothing was sent
	retryCode                 // the upstream answered with a retryable status
)

func (f *forwarding) run() {
	f.preset.note(f.w.Header())
	f.upgrade = upgradeProtocol(f.r)
	if !f.admit() {
		return
	}
	defer f.release()
	if !f.prepareBody() {
		return
	}
	var prev *cluster.Endpoint
	staleUsed := false
	for f.attempt = 1; ; {
		ep, panicked := f.cl.Pick(prev, f.regions)
		if panicked {
			f.p.metrics.cluster.NoHealthy.WithLabelValues(f.cl.Name, f.cl.Config.PanicMode).Inc()
		}
		if ep == nil {
			f.fault = faultUpstream
			f.w.Header().Set("Retry-After", "1")
			f.fail(http.StatusServiceUnavailable, "no healthy upstream endpoint")
			return
		}
		f.log.Upstream = ep.Addr
		switch f.try(ep) {
		case served:
			return
		case retryStale:
			if staleUsed {
				f.fault = faultUpstream
				f.fail(http.StatusBadGateway, "upstream closed the connection")
				return
			}
			staleUsed = true
			f.p.metrics.upstreamTries.WithLabelValues(f.cl.Name, "stale_connection").Inc()
			continue // same endpoint, fresh connection, attempt not charged
		case retryDial:
			f.p.metrics.upstreamTries.WithLabelValues(f.cl.Name, "connect").Inc()
		case retryCode:
			f.p.metrics.upstreamTries.WithLabelValues(f.cl.Name, "status").Inc()
		}
		f.attempt++
		prev = ep
		if f.wait > 0 && !f.sleep(f.wait) {
			f.upstreamFailed(context.Canceled)
			return
		}
	}
}

// mayRetry decides, before an answer is given up, whether this request may
// be tried again: attempts left, time left for a backoff and an attempt,
// and room in the cluster's retry budget. A status retry also needs a
// request that is safe to repeat and a body that can be sent again; a
// failure to connect sent nothing, so any request may retry it.
func (f *forwarding) mayRetry(afterStatus bool) bool {
	if f.attempt >= f.rr.maxTries {
		return false
	}
	if afterStatus && (!f.eligible || (f.hasBody && f.replay == nil)) {
		return false
	}
	if !afterStatus && !f.bodyReadOK && f.replay == nil {
		return false
	}
	wait := cluster.Backoff(f.attempt)
	if time.Now().Add(wait + minAttempt).After(f.deadline) {
		return false
	}
	done, ok := f.cl.AdmitRetry()
	if !ok {
		return false
	}
	f.wait = wait
	f.retries++
	f.releaseRetry = append(f.releaseRetry, done)
	return true
}

// minAttempt is the least time worth giving another attempt.
const minAttempt = 5 * time.Millisecond

func (f *forwarding) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.r.Context().Done():
		return false
	}
}

func (f *forwarding) try(ep *cluster.Endpoint) outcome {
	if f.cl.Config.Protocol == "h2c" {
		return f.tryH2C(ep)
	}
	ctx := f.r.Context()
	maxAge := time.Duration(0)
	if !f.eligible && (f.hasBody || f.r.Method != "GET") {
		maxAge = staleAge
	}
	conn, err := ep.Pool.Get(ctx, f.deadline, maxAge)
	if err != nil {
		if errors.Is(err, upstream.ErrTooManyConnections) {
			f.shed("connections")
			return served
		}
		if ctx.Err() == nil {
			f.cl.Report(ep, 0, true)
		}
		if ctx.Err() == nil && f.mayRetry(false) {
			f.p.metrics.upstreamErrors.WithLabelValues(f.cl.Name, "connect").Inc()
			return retryDial
		}
		f.upstreamFailed(err)
		return served
	}
	_ = conn.SetDeadline(f.deadline)

	bw := conn.Writer()
	f.writeHead(bw, ep.Addr)
	if f.replay != nil {
		_, _ = bw.Write(f.replay)
	} else if f.hasBody {
		if err := f.copyRequestBody(bw); err != nil {
			conn.Close()
			return served
		}
	}
	if err := bw.Flush(); err != nil {
		conn.Close()
		if conn.Reused && (f.bodyReadOK || f.replay != nil) && ctx.Err() == nil {
			return retryStale // the write failed: nothing reached a live server
		}
		f.cl.Report(ep, 0, true)
		f.upstreamFailed(err)
		return served
	}

	// Most upstreams answer at once; only a slow answer pays for watching
	// the client, so that a client that leaves interrupts the wait.
	if !conn.Answered(quickAnswer, f.deadline) {
		stop := context.AfterFunc(ctx, conn.Interrupt)
		defer stop()
	}
	hdr := f.w.Header()
	var rh upstream.ResponseHead
	for {
		rh, err = upstream.ReadResponseHead(conn.Reader(), hdr, maxResponseHead)
		if err != nil || rh.Status >= 200 || rh.Status == 101 {
			break
		}
		f.resetHeader() // an interim 1xx response: skip it
	}
	if err != nil {
		conn.Close()
		f.resetHeader()
		// A reused connection that the server had closed while idle: the
		// request may be replayed if it is safe to repeat.
		if rh.Status == 0 && conn.Reused && f.eligible && (!f.hasBody || f.replay != nil) && ctx.Err() == nil && isConnDrop(err) {
			return retryStale
		}
		if ctx.Err() == nil {
			f.cl.Report(ep, 0, true)
		}
		f.upstreamFailed(err)
		return served
	}
	f.cl.Report(ep, rh.Status, false)
	if rh.Status == 101 && f.upgrade != "" {
		f.tunnel(conn)
		return served
	}
	if rh.Status == 101 {
		conn.Close()
		f.resetHeader()
		f.fault = faultUpstream
		f.fail(http.StatusBadGateway, "upstream switched protocols without an upgrade request")
		return served
	}
	if f.rr.retryable(rh.Status) && f.mayRetry(true) {
		b := conn.Body(f.r.Method, rh, nil)
		_, _ = io.CopyN(io.Discard, b, retryDrainBytes)
		conn.Release(b.Done() && !rh.Close)
		f.resetHeader()
		return retryCode
	}
	if rh.Status >= 500 {
		f.fault = faultUpstream
	}
	f.respond(conn, rh)
	return served
}

// respond streams the upstream response to the client.
func (f *forwarding) respond(conn *upstream.Conn, rh upstream.ResponseHead) {
	hdr := f.w.Header()
	var trailer http.Header
	if len(hdr["Trailer"]) > 0 {
		trailer = http.Header{}
	}
	stripHopByHop(hdr)
	f.rr.headers.ApplyResponse(hdr)
	hdr["X-Request-Id"] = []string{f.reqID}
	body := conn.Body(f.r.Method, rh, trailer)
	f.w.WriteHeader(rh.Status)
	f.log.Status = rh.Status

	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	stream := rh.ContentLength < 0
	flusher, _ := f.w.(http.Flusher)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			f.log.Bytes += int64(n)
			if _, werr := f.w.Write(buf[:n]); werr != nil {
				conn.Close()
				f.log.Err = "client went away during the response"
				return
			}
			if stream && flusher != nil && body.Buffered() == 0 {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			conn.Close()
			f.log.Err = "upstream body: " + rerr.Error()
			f.p.metrics.upstreamErrors.WithLabelValues(f.cl.Name, f.errKind(rerr)).Inc()
			f.abort = true
			return
		}
	}
	for k, v := range trailer {
		hdr[http.TrailerPrefix+k] = v
	}
	conn.Release(body.Done() && !rh.Close)
}

// copyRequestBody streams the client's body upstream. A failure reading the
// client is answered here (413 or 499); a failure writing upstream is a 502.
func (f *forwarding) copyRequestBody(bw *bufio.Writer) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	chunked := f.bodyLen < 0
	for {
		n, rerr := f.body.Read(buf)
		if n > 0 {
			f.bodyReadOK = false
			var werr error
			if chunked {
				_, _ = bw.WriteString(strconv.FormatInt(int64(n), 16))
				_, _ = bw.WriteString("\r\n")
			}
			_, werr = bw.Write(buf[:n])
			if chunked {
				_, werr = bw.WriteString("\r\n")
			}
			if werr != nil {
				f.upstreamFailed(werr)
				return werr
			}
		}
		if rerr == io.EOF {
			if chunked {
				_, _ = bw.WriteString("0\r\n\r\n")
			}
			return nil
		}
		if rerr != nil {
			f.bodyFailed(rerr)
			return rerr
		}
	}
}

// bodyFailed answers a request whose body could not be read from the
// client: 413 over max_body_bytes, 408 when it stalled past the listener's
// request_body_timeout_ms, 400 otherwise.
func (f *forwarding) bodyFailed(err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		f.fail(http.StatusRequestEntityTooLarge, "request body over the listener's max_body_bytes")
	case listener.IsBodyTimeout(err):
		f.fail(http.StatusRequestTimeout, "request body not received within the listener's request_body_timeout_ms")
		f.log.Err = "client body: " + err.Error()
	default:
		f.fail(http.StatusBadRequest, "could not read the request body")
		f.log.Err = "client body: " + err.Error()
	}
}

// clientBody reads the client's request body and keeps a read error
// other than EOF, for failures that surface through an upstream
// transport which reads the body itself (h2c).
type clientBody struct {
	r   io.Reader
	err atomic.Pointer[error]
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err.Store(&err)
	}
	return n, err
}

// failed returns the error reading the client's body, or nil.
func (b *clientBody) failed() error {
	if e := b.err.Load(); e != nil {
		return *e
	}
	return nil
}

// upstreamFailed answers a failed exchange: 499 when the client left, 408
// or 413 when the client's body failed, 504 when the route deadline
// passed, 502 otherwise.
func (f *forwarding) upstreamFailed(err error) {
	if berr := f.clientBody.failed(); berr != nil && f.r.Context().Err() == nil {
		f.bodyFailed(berr)
		return
	}
	kind := f.errKind(err)
	f.log.Err = err.Error()
	switch kind {
	case "client_gone":
		f.log.Status = 499
		return
	case "timeout":
		f.p.metrics.upstreamErrors.WithLabelValues(f.cl.Name, kind).Inc()
		f.fault = faultUpstream
		f.fail(http.StatusGatewayTimeout, "upstream did not answer within the route timeout")
	default:
		f.fault = faultUpstream
		f.p.metrics.upstreamErrors.WithLabelValues(f.cl.Name, kind).Inc()
		f.fail(http.StatusBadGateway, "upstream "+kind+" error")
	}
}

func (f *forwarding) errKind(err error) string {
	var de *upstream.DialError
	switch {
	case f.r.Context().Err() != nil:
		return "client_gone"
	case !time.Now().Before(f.deadline):
		return "timeout"
	case errors.As(err, &de):
		return "connect"
	case errors.Is(err, upstream.ErrMalformed):
		return "malformed"
	}
	return "reset"
}

func (f *forwarding) fail(code int, msg string) {
	f.log.Status = code
	retryAfter := f.w.Header().Get("Retry-After")
	f.resetHeader()
	if retryAfter != "" {
		f.w.Header().Set("Retry-After", retryAfter)
	}
	stage.WriteError(f.w, code, msg, f.reqID)
}

// presetKeys are the response header keys set before the proxy ran (by a
// wrapping handler, such as Alt-Svc); they survive resetHeader. There are
// usually none or one, so a few are held inline and the rest spill over.
type presetKeys struct {
	inline [2]string
	n      int
	spill  []string
}

func (p *presetKeys) note(h http.Header) {
	for k := range h {
		if p.n < len(p.inline) {
			p.inline[p.n] = k
			p.n++
		} else {
			p.spill = append(p.spill, k)
		}
	}
}

func (p *presetKeys) has(k string) bool {
	return slices.Contains(p.inline[:p.n], k) || slices.Contains(p.spill, k)
}

// resetHeader drops what an upstream answer put in the response header.
func (f *forwarding) resetHeader() {
	h := f.w.Header()
	for k := range h {
		if !f.preset.has(k) {
			delete(h, k)
		}
	}
}

func isConnDrop(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}
