package proxy

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/stage"
)

// entry serves requests arriving on one named listener.
type entry struct {
	p        *Proxy
	listener string
}

// exchange is one request's state on the proxy's side, in one allocation:
// the stages' Exchange, its access log line and its route match. They are
// pooled (855 bytes a request otherwise): nothing keeps a pointer into one
// past ServeHTTP (the access log copies its line, the cache's background
// refresh copies the Exchange and its Match).
type exchange struct {
	x   stage.Exchange
	log accesslog.Entry
	m   route.Match
	rq  route.Request // what header and query matchers see
}

// handoff serves x through route i's chain: body routing (l7/stage) picked
// it. The route rolls its revision as route match does.
func (rt *Runtime) handoff(x *stage.Exchange, i int32) {
	rr := &rt.routes[i]
	cl := rr.pickCluster(rand.IntN(100))
	x.Route, x.Cluster, x.Match.Route = rr.cfg, cl, i
	x.Log.Route, x.Log.Revision = rr.cfg.ID, cl.Name
	rr.chain.Run(x)
}

// ServeHTTP is the request path: the screen chain (before routing), the
// checks every protocol shares, route match and the traffic split's roll
// of a revision, then the route's chain (its policy stages, then
// forward), the route's metrics and the access log line.
func (e *entry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ex := exchanges.Get().(*exchange)
	abort := e.serve(ex, w, r)
	*ex = exchange{} // drop what it points to; not on a panic: then it is left to the collector
	exchanges.Put(ex)
	if abort {
		// The response was cut short after its head went out: reset the
		// client stream rather than end it as if it were complete.
		panic(http.ErrAbortHandler)
	}
}

var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// serve is ServeHTTP on a zeroed exchange; it reports whether the
// response must be cut off.
func (e *entry) serve(ex *exchange, w http.ResponseWriter, r *http.Request) (abort bool) {
	p := e.p
	start := time.Now()
	dropConnectionListed(r.Header) // before anything reads or adds a field
	rt := p.active.Load()
	log, x := &ex.log, &ex.x
	_, query, _ := splitTarget(r)
	*log = accesslog.Entry{Start: start, ReqID: requestID(r.Header.Get("X-Request-Id")), Remote: r.RemoteAddr,
		Method: r.Method, Host: r.Host, Proto: r.Proto, Query: query, Req: r}
	x.W, x.R, x.Log = w, r, log
	span := p.tracer.Start(r.Header, start) // continues or starts the trace; sets traceparent for the upstream
	log.TraceID = span.TraceID()
	defer p.endSpan(&span, log)
	if rt == nil {
		p.reply(w, log, http.StatusServiceUnavailable, "no active snapshot")
		return
	}
	if !rt.screen.Run(x) {
		p.replied(log)
		return
	}
	ct, reason, msg := checkRequest(r, rt.slashes)
	if reason != "" {
		log.Path = r.URL.EscapedPath()
		p.badRequest(w, log, reason, msg)
		return
	}
	log.Path = ct.path
	m := &ex.m
	ex.rq = route.Request{Header: r.Header, Query: ct.query}
	rt.table.LookupRequest(ct.host, r.Method, ct.path, &ex.rq, m)
	switch m.Status {
	case http.StatusNotFound:
		p.reply(w, log, http.StatusNotFound, "no route")
		return
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rt.table.Allow(ct.host, ct.path))
		p.reply(w, log, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	rr := &rt.routes[m.Route]
	cl := rr.pickCluster(rand.IntN(100)) // nil for body routing: the chosen route rolls its own
	log.Route = rr.cfg.ID
	if cl != nil {
		log.Revision = cl.Name
	}
	x.Route, x.Match, x.Cluster = rr.cfg, m, cl
	x.Path, x.Query, x.Host = ct.path, ct.query, ct.host
	if lr := rt.listeners[e.listener]; lr != nil {
		x.Listener = &lr.cfg
	}
	rr.chain.Run(x)
	rr = &rt.routes[m.Route] // body routing handed the request to the route it chose
	p.recordFault(rr.cfg.ID, log.Status, x.Fault)
	dur := time.Since(start)
	rr.stats.observe(log.Revision, log.Status, dur.Seconds())
	log.Dur = dur
	p.accessLog.Write(log)
	return x.Abort
}

// reply answers a request that never reached a route or an upstream.
func (p *Proxy) reply(w http.ResponseWriter, log *accesslog.Entry, code int, msg string) {
	log.Status = code
	stage.WriteError(w, code, msg, log.ReqID)
	p.replied(log)
}

// replied counts and logs a request answered without a route (by reply
// or by the screen chain).
func (p *Proxy) replied(log *accesslog.Entry) {
	log.Dur = time.Since(log.Start)
	p.metrics.unmatched.WithLabelValues(strconv.Itoa(log.Status)).Inc()
	p.accessLog.Write(log)
}

// splitTarget returns the escaped path and raw query of the request target:
// origin-form as sent, or the path of an absolute-form target.
func splitTarget(r *http.Request) (path, query string, ok bool) {
	t := r.RequestURI
	if strings.HasPrefix(t, "/") {
		if i := strings.IndexByte(t, '?'); i >= 0 {
			return t[:i], t[i+1:], true
		}
		return t, "", true
	}
	if r.URL != nil && r.URL.IsAbs() {
		p := r.URL.EscapedPath()
		if p == "" {
			p = "/"
		}
		return p, r.URL.RawQuery, true
	}
	return "", "", false
}

var (
	reqIDPrefix = func() string {
		var b [6]byte
		_, _ = crand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	reqIDSeq atomic.Uint64
)

// requestID keeps a client's X-Request-Id when it is 1 to 128 visible ASCII
// bytes, and otherwise makes a new one: a per-process random prefix and a
// counter, unique without a random read per request.
func requestID(in string) string {
	if n := len(in); n > 0 && n <= 128 {
		good := true
		for i := 0; i < n; i++ {
			if in[i] <= ' ' || in[i] >= 0x7f {
				good = false
				break
			}
		}
		if good {
			return in
		}
	}
	var b [32]byte
	out := append(b[:0], reqIDPrefix...)
	out = append(out, '-')
	out = strconv.AppendUint(out, reqIDSeq.Add(1), 16)
	return string(out)
}
