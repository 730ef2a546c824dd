package proxy

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/route"
)

// entry serves requests arriving on one named listener.
type entry struct {
	p        *Proxy
	listener string
}

func (e *entry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := e.p
	start := time.Now()
	dropConnectionListed(r.Header) // before anything reads or adds a field
	rt := p.active.Load()
	reqID := requestID(r.Header.Get("X-Request-Id"))
	_, query, _ := splitTarget(r)
	log := accesslog.Entry{Start: start, ReqID: reqID, Remote: r.RemoteAddr, Method: r.Method, Host: r.Host, Proto: r.Proto, Query: query, Req: r}
	span := p.tracer.Start(r.Header, start) // continues or starts the trace; sets traceparent for the upstream
	log.TraceID = span.TraceID()
	defer p.endSpan(&span, &log)
	if rt == nil {
		p.reply(w, &log, http.StatusServiceUnavailable, "no active snapshot")
		return
	}
	if !p.screen(w, r, rt, &log) {
		return
	}
	ct, reason, msg := checkRequest(r, rt.slashes)
	if reason != "" {
		log.Path = r.URL.EscapedPath()
		p.badRequest(w, &log, reason, msg)
		return
	}
	path, query, host := ct.path, ct.query, ct.host
	log.Path = path
	var m route.Match
	rt.table.Lookup(host, r.Method, path, &m)
	switch m.Status {
	case http.StatusNotFound:
		p.reply(w, &log, http.StatusNotFound, "no route")
		return
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rt.table.Allow(host, path))
		p.reply(w, &log, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	rr := &rt.routes[m.Route]
	cl := rr.pickCluster(rand.IntN(100))
	log.Route, log.Revision = rr.cfg.ID, cl.Name

	var maxBody int64 = -1
	var tunnelIdle time.Duration
	if lr := rt.listeners[e.listener]; lr != nil {
		maxBody = lr.cfg.MaxBodyBytes
		tunnelIdle = time.Duration(lr.cfg.TunnelIdleTimeoutMs) * time.Millisecond
	}
	fw := forwarding{p: p, w: w, r: r, rr: rr, cl: cl, path: path, query: query, reqID: reqID,
		deadline: start.Add(rr.timeout), maxBody: maxBody, tunnelIdle: tunnelIdle, log: &log}
	if fw.authorize(&m, rt) {
		fw.run()
	} else {
		fw.recordFault()
	}
	dur := time.Since(start)
	rr.stats.observe(cl.Name, log.Status, dur.Seconds())
	log.Dur = dur
	p.accessLog.Write(&log)
	if fw.abort {
		// The response was cut short after its head went out: reset the
		// client stream rather than end it as if it were complete.
		panic(http.ErrAbortHandler)
	}
}

// reply answers a request that never reached a route or an upstream.
func (p *Proxy) reply(w http.ResponseWriter, log *accesslog.Entry, code int, msg string) {
	log.Status = code
	log.Dur = time.Since(log.Start)
	p.metrics.unmatched.WithLabelValues(strconv.Itoa(code)).Inc()
	writeError(w, code, msg, log.ReqID)
	p.accessLog.Write(log)
}

func writeError(w http.ResponseWriter, code int, msg, reqID string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Request-Id", reqID)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(strconv.Itoa(code) + " " + http.StatusText(code) + ": " + msg + " (request id " + reqID + ")\n"))
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
