package proxy

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/rampart-edge/rampart/l7/stage"
)

// Whose fault a failed request is (see stage.FaultGateway).
const (
	faultGateway  = stage.FaultGateway
	faultUpstream = stage.FaultUpstream
	faultClient   = stage.FaultClient
)

const (
	admittedGlobal = 1 << iota
	admittedRoute
	admittedCluster
)

// admit applies, in order, the proxy-wide concurrency limit, the route's,
// and the cluster's circuit breaker (max_requests). Beyond any of them the
// request gets an immediate 503 with Retry-After: nothing waits in a queue.
func (f *forwarding) admit() bool {
	if f.p.inflight.Add(1) > int64(f.rr.limits.MaxConcurrentRequests) {
		f.p.inflight.Add(-1)
		f.shed("global")
		return false
	}
	f.admitted |= admittedGlobal
	if lim := f.rr.cfg.MaxConcurrentRequests; lim > 0 {
		if f.rr.stats.inflight.Add(1) > int64(lim) {
			f.rr.stats.inflight.Add(-1)
			f.shed("route")
			return false
		}
		f.admitted |= admittedRoute
	}
	if !f.cl.Admit() {
		f.shed("breaker")
		return false
	}
	f.admitted |= admittedCluster
	return true
}

// release undoes admit and returns the retry budget and body buffer, then
// records whose fault a failure was.
func (f *forwarding) release() {
	if f.admitted&admittedCluster != 0 {
		f.cl.Done()
	}
	if f.admitted&admittedRoute != 0 {
		f.rr.stats.inflight.Add(-1)
	}
	if f.admitted&admittedGlobal != 0 {
		f.p.inflight.Add(-1)
	}
	for _, done := range f.releaseRetry {
		done()
	}
	if f.replayBuf != nil {
		replayBufs.Put(f.replayBuf)
		f.replay, f.replayBuf = nil, nil
	}
}

// recordFault counts a failed request of a route by whose fault it was
// (when no stage said: the client's for 4xx, the upstream's for 5xx).
func (p *Proxy) recordFault(route string, st int, fault string) {
	if st < 400 {
		return
	}
	if fault == "" {
		fault = faultClient
		if st >= 500 {
			fault = faultUpstream
		}
	}
	p.metrics.faults.WithLabelValues(route, fault).Inc()
}

// shed refuses the request at once.
func (f *forwarding) shed(scope string) {
	f.p.metrics.shed.WithLabelValues(scope).Inc()
	f.fault = faultGateway
	if scope == "breaker" || scope == "connections" {
		f.fault = faultUpstream
	}
	f.log.Err = "shed: " + scope + " limit"
	f.log.Security = true
	f.w.Header().Set("Retry-After", "1")
	f.fail(http.StatusServiceUnavailable, "over the "+scope+" limit, retry later")
}

var replayBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// prepareBody sets up the request body: refused when over max_body_bytes;
// kept whole in memory (up to max_retry_body_bytes) when the request may
// be retried, so it can be sent again; otherwise streamed.
func (f *forwarding) prepareBody() bool {
	r := f.r
	f.hasBody = r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	f.bodyReadOK = true
	f.bodyLen = r.ContentLength
	f.eligible = r.Method == "GET" || r.Method == "HEAD" || r.Method == "OPTIONS" ||
		(f.rr.idemKey != "" && r.Header.Get(f.rr.idemKey) != "")
	if !f.hasBody {
		return true
	}
	if f.maxBody >= 0 && r.ContentLength > f.maxBody {
		f.fail(http.StatusRequestEntityTooLarge, "request body over the listener's max_body_bytes")
		return false
	}
	f.clientBody.r = r.Body
	if f.maxBody >= 0 {
		f.clientBody.r = http.MaxBytesReader(f.w, r.Body, f.maxBody)
	}
	f.body = &f.clientBody
	limit := int64(f.rr.limits.MaxRetryBodyBytes)
	if !f.eligible || f.rr.maxTries < 2 || limit == 0 || r.ContentLength > limit {
		return true
	}
	bp := replayBufs.Get().(*[]byte)
	buf := bytes.NewBuffer((*bp)[:0])
	n, err := buf.ReadFrom(io.LimitReader(f.body, limit+1))
	*bp = buf.Bytes()
	if err != nil {
		replayBufs.Put(bp)
		f.bodyFailed(err)
		return false
	}
	if n > limit { // too long to keep: stream it, without retries
		f.body = io.MultiReader(bytes.NewReader(*bp), f.body)
		f.bodyReadOK = false
		f.replayBuf = bp
		return true
	}
	f.replay, f.replayBuf, f.bodyLen = *bp, bp, n
	return true
}
