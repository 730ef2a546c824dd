package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

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

// forwarding is one request's trip upstream, with its retries.
type forwarding struct {
	p          *Proxy
	w          http.ResponseWriter
	r          *http.Request
	rr         *routeRT
	cl         *clusterRT
	path       string
	query      string
	reqID      string
	deadline   time.Time
	maxBody    int64
	log        *accessEntry
	abort      bool // the response must be cut off (its head was already sent)
	body       io.Reader
	hasBody    bool
	bodyReadOK bool // no byte of the request body has been consumed yet
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
	r := f.r
	f.hasBody = r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	f.bodyReadOK = true
	if f.hasBody {
		if f.maxBody >= 0 && r.ContentLength > f.maxBody {
			f.fail(http.StatusRequestEntityTooLarge, "request body over the listener's max_body_bytes")
			return
		}
		f.body = r.Body
		if f.maxBody >= 0 {
			f.body = http.MaxBytesReader(f.w, r.Body, f.maxBody)
		}
	}
	var prev *endpointRT
	staleUsed := false
	for attempt := 1; ; {
		ep := f.cl.pick(prev)
		f.log.upstream = ep.addr
		switch f.try(ep, attempt < f.rr.maxTries) {
		case served:
			return
		case retryStale:
			if staleUsed {
				f.fail(http.StatusBadGateway, "upstream closed the connection")
				return
			}
			staleUsed = true
			f.p.metrics.upstreamTries.WithLabelValues(f.cl.name, "stale_connection").Inc()
			continue // same endpoint, fresh connection, attempt not charged
		case retryDial:
			attempt++
			f.p.metrics.upstreamTries.WithLabelValues(f.cl.name, "connect").Inc()
			prev = ep
		case retryCode:
			attempt++
			f.p.metrics.upstreamTries.WithLabelValues(f.cl.name, "status").Inc()
			prev = ep
		}
	}
}

// canRetryStatus: a retryable status is retried only for a request that is
// safe to repeat and whose body (if any) has not been consumed.
func (f *forwarding) canRetryStatus() bool {
	if f.hasBody || time.Now().After(f.deadline) {
		return false
	}
	if f.rr.safeRetry {
		return true
	}
	return f.rr.idemKey != "" && f.r.Header.Get(f.rr.idemKey) != ""
}

func (f *forwarding) try(ep *endpointRT, mayRetry bool) outcome {
	ctx := f.r.Context()
	maxAge := time.Duration(0)
	if f.hasBody {
		maxAge = staleAge
	}
	conn, err := ep.pool.Get(ctx, f.deadline, maxAge)
	if err != nil {
		if mayRetry && ctx.Err() == nil && time.Now().Before(f.deadline) {
			f.p.metrics.upstreamErrors.WithLabelValues(f.cl.name, "connect").Inc()
			return retryDial
		}
		f.upstreamFailed(err)
		return served
	}
	_ = conn.SetDeadline(f.deadline)

	bw := conn.Writer()
	f.writeHead(bw)
	if f.hasBody {
		if err := f.copyRequestBody(bw); err != nil {
			conn.Close()
			return served
		}
	}
	if err := bw.Flush(); err != nil {
		conn.Close()
		if conn.Reused && f.bodyReadOK && ctx.Err() == nil {
			return retryStale
		}
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
		clear(hdr) // an interim 1xx response: skip it
	}
	if err != nil {
		conn.Close()
		clear(hdr)
		if rh.Status == 0 && conn.Reused && f.bodyReadOK && !f.hasBody && ctx.Err() == nil && isConnDrop(err) {
			return retryStale
		}
		f.upstreamFailed(err)
		return served
	}
	if rh.Status == 101 {
		conn.Close()
		clear(hdr)
		f.fail(http.StatusBadGateway, "upstream switched protocols without an upgrade request")
		return served
	}
	if mayRetry && f.rr.retryable(rh.Status) && f.canRetryStatus() {
		b := conn.Body(f.r.Method, rh, nil)
		_, _ = io.CopyN(io.Discard, b, retryDrainBytes)
		conn.Release(b.Done() && !rh.Close)
		clear(hdr)
		return retryCode
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
	hdr["X-Request-Id"] = []string{f.reqID}
	body := conn.Body(f.r.Method, rh, trailer)
	f.w.WriteHeader(rh.Status)
	f.log.status = rh.Status

	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	stream := rh.ContentLength < 0
	flusher, _ := f.w.(http.Flusher)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			f.log.bytes += int64(n)
			if _, werr := f.w.Write(buf[:n]); werr != nil {
				conn.Close()
				f.log.err = "client went away during the response"
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
			f.log.err = "upstream body: " + rerr.Error()
			f.p.metrics.upstreamErrors.WithLabelValues(f.cl.name, f.errKind(rerr)).Inc()
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
	chunked := f.r.ContentLength < 0
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
			var tooBig *http.MaxBytesError
			if errors.As(rerr, &tooBig) {
				f.fail(http.StatusRequestEntityTooLarge, "request body over the listener's max_body_bytes")
			} else {
				f.fail(http.StatusBadRequest, "could not read the request body")
				f.log.err = "client body: " + rerr.Error()
			}
			return rerr
		}
	}
}

// upstreamFailed answers a failed exchange: 499 when the client left, 504
// when the route deadline passed, 502 otherwise.
func (f *forwarding) upstreamFailed(err error) {
	kind := f.errKind(err)
	f.log.err = err.Error()
	switch kind {
	case "client_gone":
		f.log.status = 499
		return
	case "timeout":
		f.p.metrics.upstreamErrors.WithLabelValues(f.cl.name, kind).Inc()
		f.fail(http.StatusGatewayTimeout, "upstream did not answer within the route timeout")
	default:
		f.p.metrics.upstreamErrors.WithLabelValues(f.cl.name, kind).Inc()
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
	f.log.status = code
	clear(f.w.Header())
	writeError(f.w, code, msg, f.reqID)
}

func isConnDrop(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && !oe.Timeout()
}
