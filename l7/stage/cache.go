package stage

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/cache"
)

func init() { register(SlotCache, buildCache) }

// cacheStage is the stage of a route with cache: it answers GET and HEAD
// from the proxy's store when it can, and otherwise runs the next stage
// (forward) itself through a recorder that keeps what may be stored.
// Concurrent misses of one key make one upstream request (flights);
// the others wait for it and are answered from the store.
type cacheStage struct {
	id                             string
	next                           Stage
	store                          *cache.Store
	shared                         bool // the key leaves the tenant out
	authed                         bool // the route has an auth policy
	ttl                            time.Duration
	maxObj                         int
	swr, sie                       time.Duration
	flight                         *flights
	m                              *cacheMetrics
	hits, misses, stale, coalesced prometheus.Counter

	mu           sync.Mutex
	revalidating map[string]bool // keys with a background revalidation running
}

type cacheMetrics struct {
	hits, misses, stale, coalesced *prometheus.CounterVec
}

// cacheState is the proxy's store and its series: one per Metrics (one
// per proxy), kept across snapshots.
type cacheState struct {
	once    sync.Once
	store   *cache.Store
	metrics *cacheMetrics
	flight  flights
}

// flights are the keys with a miss on its way upstream. Hand-written
// rather than x/sync/singleflight so that a request knows it waits before
// it waits (rampart_cache_coalesced_total counts waiters as they arrive,
// which the coalescing test relies on) and can stop waiting when its
// client leaves.
type flights struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// join returns the key's flight and whether the caller leads it (then it
// must call leave).
func (f *flights) join(key string) (chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.m[key]; ok {
		return c, false
	}
	if f.m == nil {
		f.m = map[string]chan struct{}{}
	}
	c := make(chan struct{})
	f.m[key] = c
	return c, true
}

func (f *flights) leave(key string, c chan struct{}) {
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
	close(c)
}

func (m *Metrics) cacheState(maxBytes int64) *cacheState {
	cs := &m.cache
	cs.once.Do(func() {
		cs.store = cache.NewStore(maxBytes)
		vec := func(name, help string) *prometheus.CounterVec {
			return m.Register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"route"})).(*prometheus.CounterVec)
		}
		cs.metrics = &cacheMetrics{
			hits:      vec("rampart_cache_hits_total", "Requests answered from the response cache while fresh, by route."),
			misses:    vec("rampart_cache_misses_total", "Cacheable requests sent upstream (miss, revalidation, request no-cache), by route."),
			stale:     vec("rampart_cache_stale_total", "Requests answered with a stale object (stale-while-revalidate, stale-if-error), by route."),
			coalesced: vec("rampart_cache_coalesced_total", "Requests that waited for another request's upstream fetch of the same key, by route."),
		}
		st := cs.store
		m.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rampart_cache_evictions_total",
			Help: "Objects evicted from the response cache to stay within limits.cache_max_bytes."}, func() float64 { return float64(st.Evictions()) }))
		m.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rampart_cache_bytes",
			Help: "Bytes the response cache holds (objects weighed with their headers and keys)."}, func() float64 { return float64(st.Bytes()) }))
		m.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "rampart_cache_purge_refused_total",
			Help: "Responses not stored because a purge made while they were fetched selects them."}, func() float64 { return float64(st.PurgeRefused()) }))
	})
	cs.store.SetMaxBytes(maxBytes)
	return cs
}

// CacheStore is the proxy's response cache store (for purges), nil until
// a snapshot with a cached route was built.
func (m *Metrics) CacheStore() *cache.Store { return m.cache.store }

func buildCache(r *Route, env *Env) (Stage, error) {
	rc := r.Config.Cache
	if rc == nil {
		return nil, nil
	}
	cs := env.Metrics.cacheState(env.Snap.Config.Limits.CacheBytes())
	id := r.Config.ID
	s := &cacheStage{id: id, store: cs.store, shared: rc.Shared, authed: r.Config.AuthPolicyID != "",
		ttl: time.Duration(rc.TTLMs) * time.Millisecond, maxObj: rc.MaxObjectBytes,
		swr: time.Duration(rc.StaleWhileRevalidateMs) * time.Millisecond, sie: time.Duration(rc.StaleIfErrorMs) * time.Millisecond,
		flight: &cs.flight, m: cs.metrics, revalidating: map[string]bool{},
		hits: cs.metrics.hits.WithLabelValues(id), misses: cs.metrics.misses.WithLabelValues(id),
		stale: cs.metrics.stale.WithLabelValues(id), coalesced: cs.metrics.coalesced.WithLabelValues(id)}
	return s, nil
}

func (*cacheStage) Name() string { return "cache" }

func (s *cacheStage) setNext(n Stage) { s.next = n }

// passFor bounds how long a key whose response was not storable skips
// request coalescing (Varnish's hit-for-miss default is 120 s); at most the
// route's ttl_ms.
const passFor = 2 * time.Minute

// Cache-Status values (RFC 9211) this cache writes.
const cacheStatusName = "Cache-Status"

func (s *cacheStage) Serve(x *Exchange) Verdict {
	if s.next == nil {
		return Continue
	}
	r := x.R
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.next.Serve(x)
		// RFC 9111 4.4: an unsafe method's non-error answer invalidates the target.
		if x.Log.Status > 0 && x.Log.Status < 400 {
			s.store.Delete(s.key(x), r.Header)
		}
		return Replied
	}
	if r.Header.Get("Range") != "" || r.Header.Get("Upgrade") != "" {
		x.W.Header().Set(cacheStatusName, "rampart; fwd=bypass")
		return s.next.Serve(x)
	}
	key := s.key(x)
	rcc, err := cache.ParseRequestCC(r.Header)
	if err != nil {
		rcc = cache.RequestCC{} // an unreadable request Cache-Control is ignored
	}
	now := time.Now()
	if !rcc.NoCache {
		if o := s.store.Get(key, r.Header); o != nil {
			ttl := o.TTL(now)
			usable := ttl > 0 && !o.CC.NoCache && !(rcc.HasMaxAge && o.Age(now) > rcc.MaxAge)
			if usable {
				s.hits.Inc()
				s.write(x, o, now, "rampart; hit; ttl="+secs(ttl))
				return Replied
			}
			if !o.CC.NoCache && !o.CC.MustRevalidate && -ttl <= s.swrOf(o) && !rcc.HasMaxAge {
				s.stale.Inc()
				s.write(x, o, now, "rampart; hit; ttl="+secs(ttl)+"; detail=stale-while-revalidate")
				s.revalidateInBackground(x, key, o)
				return Replied
			}
			s.misses.Inc()
			s.fetch(x, key, o, rcc, now, "stale")
			return Replied
		}
	}
	s.misses.Inc()
	if rcc.NoCache {
		s.fetch(x, key, s.store.Get(key, r.Header), rcc, now, "request")
		return Replied
	}
	if s.store.Passing(key) { // its last response was not storable: no waiting behind one another
		s.fetch(x, key, nil, rcc, now, "pass")
		return Replied
	}
	// A miss: one request of the key goes upstream, the others wait for it.
	done, leader := s.flight.join(key)
	if leader {
		defer s.flight.leave(key, done)
		s.fetch(x, key, nil, rcc, now, "miss")
		return Replied
	}
	s.coalesced.Inc()
	select {
	case <-done:
	case <-r.Context().Done():
		x.Log.Status = 499
		x.Fault = FaultClient
		return Replied
	}
	now = time.Now()
	if o := s.store.Get(key, r.Header); o != nil && o.TTL(now) > 0 && !o.CC.NoCache {
		s.write(x, o, now, "rampart; fwd=miss; collapsed; ttl="+secs(o.TTL(now)))
		return Replied
	}
	s.fetch(x, key, nil, rcc, now, "miss") // the leader's answer was not stored: go on our own
	return Replied
}

func (s *cacheStage) swrOf(o *cache.Object) time.Duration {
	if o.CC.HasSWR {
		return max(o.CC.SWR, s.swr)
	}
	return s.swr
}

func (s *cacheStage) sieOf(o *cache.Object) time.Duration {
	if o.CC.HasSIE {
		return max(o.CC.SIE, s.sie)
	}
	return s.sie
}

// key is the exchange's primary key: the route, the tenant unless the
// route's cache is shared, and the routed host, path and query.
func (s *cacheStage) key(x *Exchange) string {
	tenant := ""
	if s.authed && !s.shared {
		tenant = x.Identity.Tenant
		if tenant == "" {
			tenant = "sub:" + x.Identity.Subject
		}
	}
	return cache.Key(s.id, tenant, x.Host, x.Path, x.Query)
}

func secs(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// write answers x from o: its stored header, Age, Cache-Status, and its
// body (none for HEAD, or a 304 when the client's validator matches).
func (s *cacheStage) write(x *Exchange, o *cache.Object, now time.Time, status string) {
	h := x.W.Header()
	for k, v := range o.Header {
		h[k] = v
	}
	h["Age"] = []string{secs(o.Age(now))}
	h[cacheStatusName] = []string{status}
	h["X-Request-Id"] = []string{x.Log.ReqID}
	code := o.Status
	if inm := x.R.Header.Get("If-None-Match"); inm != "" && code == http.StatusOK && etagMatch(inm, o.Header.Get("ETag")) {
		code = http.StatusNotModified
		delete(h, "Content-Length")
	}
	x.Log.Status = code
	x.W.WriteHeader(code)
	if code == http.StatusNotModified || x.R.Method == http.MethodHead {
		return
	}
	n, _ := x.W.Write(o.Body)
	x.Log.Bytes += int64(n)
}

// etagMatch is the weak comparison of If-None-Match (RFC 9110 13.1.2).
func etagMatch(inm, etag string) bool {
	if etag == "" {
		return false
	}
	if strings.TrimSpace(inm) == "*" {
		return true
	}
	etag = strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(inm, ",") {
		if strings.TrimPrefix(strings.TrimSpace(t), "W/") == etag {
			return true
		}
	}
	return false
}

// fetch sends x upstream through a recorder. With a stored object old
// the request is conditional (its validators), a 304 refreshes old and
// answers from it, and an upstream failure within the stale-if-error
// window answers with old. why is the Cache-Status fwd value.
func (s *cacheStage) fetch(x *Exchange, key string, old *cache.Object, rcc cache.RequestCC, now time.Time, why string) {
	r := x.R
	fwd := why
	if why == "pass" {
		fwd = "miss"
	}
	rec := &recorder{w: x.W, h: http.Header{}, s: s, x: x, old: old, why: fwd, noStore: rcc.NoStore}
	if old != nil && r.Method == http.MethodGet {
		// Our own validators, sent only when the client sent none.
		if et := old.Header.Get("ETag"); et != "" && r.Header.Get("If-None-Match") == "" {
			r.Header.Set("If-None-Match", et)
			rec.addedINM = true
		}
		if lm := old.Header.Get("Last-Modified"); lm != "" && r.Header.Get("If-Modified-Since") == "" {
			r.Header.Set("If-Modified-Since", lm)
			rec.addedIMS = true
		}
	}
	x.W = rec
	rec.sent = time.Now() // what purges compare with (the object's Fetched)
	s.next.Serve(x)
	x.W = rec.w
	if rec.addedINM {
		r.Header.Del("If-None-Match")
	}
	if rec.addedIMS {
		r.Header.Del("If-Modified-Since")
	}
	switch {
	case rec.refreshed != nil:
		s.store.Refresh(key, r.Header, rec.refreshed)
		x.Fault = ""
		s.write(x, rec.refreshed, time.Now(), "rampart; fwd="+fwd+"; fwd-status=304; stored; ttl="+secs(rec.refreshed.TTL(time.Now())))
	case rec.staleErr:
		s.stale.Inc()
		x.Fault = ""
		n := time.Now()
		s.write(x, old, n, "rampart; fwd="+fwd+"; fwd-status="+strconv.Itoa(rec.status)+"; ttl="+secs(old.TTL(n))+"; detail=stale-if-error")
	case rec.obj != nil && !x.Abort && rec.complete():
		s.store.Put(key, r.Header, rec.obj)
	case rec.uncacheable && why != "pass": // a marked key keeps its mark until it expires
		s.store.MarkPass(key, min(s.ttl, passFor))
	}
}

// revalidateInBackground refreshes o while the stale answer already went
// out: one at a time per key, on a copy of the request that outlives the
// client's, with its answer discarded.
func (s *cacheStage) revalidateInBackground(x *Exchange, key string, o *cache.Object) {
	s.mu.Lock()
	if s.revalidating[key] {
		s.mu.Unlock()
		return
	}
	s.revalidating[key] = true
	s.mu.Unlock()
	r := x.R.Clone(context.WithoutCancel(x.R.Context()))
	r.Method = http.MethodGet
	bx := *x // x, its Match and its Log go back to the proxy's pool when the handler returns
	bx.R = r
	if x.Match != nil {
		m := *x.Match
		bx.Match = &m
	}
	bx.W = &discardWriter{h: http.Header{}}
	bx.Log = &accesslog.Entry{Start: time.Now(), ReqID: x.Log.ReqID, Method: http.MethodGet, Host: x.Log.Host,
		Path: x.Log.Path, Route: x.Log.Route, Revision: x.Log.Revision}
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.revalidating, key)
			s.mu.Unlock()
		}()
		s.misses.Inc()
		s.fetch(&bx, key, o, cache.RequestCC{}, time.Now(), "stale")
	}()
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// recorder stands between forward and the client's writer. Forward reads
// the upstream head into h; at WriteHeader the recorder decides: a 304 to
// our conditional request or an upstream failure that a stale object
// covers is swallowed (the stage answers from the object); anything else
// goes to the client, and a storable answer within max_object_bytes is
// kept as it streams.
type recorder struct {
	w       http.ResponseWriter
	h       http.Header
	s       *cacheStage
	x       *Exchange
	old     *cache.Object
	why     string
	noStore bool
	// uncacheable: the response (not the request, nor an upstream
	// failure) said it may not be stored
	uncacheable bool
	addedINM    bool
	addedIMS    bool
	sent        time.Time // when the request went upstream
	status      int
	wrote       bool
	swallow     bool
	refreshed   *cache.Object
	staleErr    bool
	obj         *cache.Object // being recorded; nil: not storing
	clen        int64
}

func (w *recorder) Header() http.Header { return w.h }

func (w *recorder) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote, w.status = true, code
	now := time.Now()
	if old := w.old; old != nil {
		if code == http.StatusNotModified && (w.addedINM || w.addedIMS) {
			w.swallow = true
			w.refreshed = refresh(old, w.h, now, w.s.ttl)
			w.refreshed.Fetched = w.sent
			return
		}
		if code >= 500 && !old.CC.MustRevalidate && -old.TTL(now) <= w.s.sieOf(old) {
			w.swallow, w.staleErr = true, true
			return
		}
	}
	dst := w.w.Header()
	for k, v := range w.h {
		dst[k] = v
	}
	status := "rampart; fwd=" + w.why
	if w.x.R.Method == http.MethodGet && !w.noStore {
		o, why := w.record(code, now)
		if o != nil {
			w.obj = o
			status += "; stored"
		} else if why != "" {
			status += "; detail=" + why
			w.uncacheable = code < 500
		}
	} else if w.noStore {
		status += "; detail=request-no-store"
	}
	dst[cacheStatusName] = []string{status}
	w.w.WriteHeader(code)
}

// record makes the object to store from the response head, or says why not.
func (w *recorder) record(code int, now time.Time) (*cache.Object, string) {
	cc, err := cache.ParseResponseCC(strings.Join(w.h.Values("Cache-Control"), ","))
	if err != nil {
		return nil, "bad-cache-control"
	}
	ok, why := cache.Storable(http.MethodGet, code, w.h, cc, w.s.authed)
	if !ok {
		return nil, why
	}
	// RFC 9111 3.5: an Authorization request on a route without an auth
	// policy (so not keyed by tenant) is stored only when the response allows it.
	if !w.s.authed && w.x.R.Header.Get("Authorization") != "" && !(cc.Public || cc.HasSMaxAge || cc.MustRevalidate) {
		return nil, "authorization"
	}
	w.clen = -1
	if cl := w.h.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err == nil {
			w.clen = n
			if n > int64(w.s.maxObj) {
				return nil, "too-large"
			}
		}
	}
	o := newObject(w.s, code, w.h, cc, now, w.x)
	o.Fetched = w.sent
	if o.Expiry() <= 0 {
		return nil, "stale" // not fresh, no validators, no stale window
	}
	return o, ""
}

func newObject(s *cacheStage, code int, h http.Header, cc cache.ResponseCC, now time.Time, x *Exchange) *cache.Object {
	hdr := h.Clone()
	delete(hdr, "X-Request-Id")
	delete(hdr, cacheStatusName)
	delete(hdr, "Age")
	o := &cache.Object{Status: code, Header: hdr, Stored: now, CC: cc, Route: s.id,
		Target: cache.Target(x.Host, x.Path, x.Query)}
	if a, err := strconv.ParseInt(h.Get("Age"), 10, 64); err == nil && a > 0 {
		o.BaseAge = time.Duration(a) * time.Second
	}
	o.Lifetime = cache.Lifetime(cc, h, responseDate(h, now), s.ttl)
	o.Keep = max(s.swrOf(o), s.sieOf(o))
	for _, v := range h.Values("Surrogate-Key") {
		o.Surrogate = append(o.Surrogate, strings.Fields(v)...)
	}
	return o
}

func responseDate(h http.Header, now time.Time) time.Time {
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		return t
	}
	return now
}

// refresh is old updated by a 304's header (RFC 9111 4.3.4).
func refresh(old *cache.Object, h http.Header, now time.Time, ttl time.Duration) *cache.Object {
	o := *old
	o.Header = old.Header.Clone()
	for k, v := range h {
		switch k {
		case "Content-Length", "X-Request-Id", cacheStatusName, "Age", "Content-Type", "Transfer-Encoding":
			continue
		}
		o.Header[k] = v
	}
	o.Stored = now
	o.BaseAge = 0
	if cc, err := cache.ParseResponseCC(strings.Join(o.Header.Values("Cache-Control"), ",")); err == nil {
		o.CC = cc
	}
	o.Lifetime = cache.Lifetime(o.CC, o.Header, responseDate(o.Header, now), ttl)
	return &o
}

func (w *recorder) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow {
		return len(p), nil
	}
	if o := w.obj; o != nil {
		if len(o.Body)+len(p) > w.s.maxObj {
			w.obj = nil // over max_object_bytes: the rest streams through uncached
		} else {
			o.Body = append(o.Body, p...)
		}
	}
	return w.w.Write(p)
}

// Flush passes a flush on (forward flushes streamed answers).
func (w *recorder) Flush() {
	if w.swallow {
		return
	}
	if f, ok := w.w.(http.Flusher); ok {
		f.Flush()
	}
}

// complete reports whether the recorded body is the whole response.
func (w *recorder) complete() bool {
	return w.obj != nil && (w.clen < 0 || int64(len(w.obj.Body)) == w.clen)
}

// CoalescedCounter is rampart_cache_coalesced_total of a route (tests).
func (m *Metrics) CoalescedCounter(route string) prometheus.Counter {
	if m.cache.metrics == nil {
		return nil
	}
	return m.cache.metrics.coalesced.WithLabelValues(route)
}
