package proxy

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/l7/purgewatch"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// cacheLab is a proxy with one cached route /c/{p...} in front of up.
func cacheLab(t *testing.T, up *testUpstream, rc snapshot.RouteCache, mod func(*snapshot.Config)) *lab {
	t.Helper()
	l := newLab(t)
	c := l.config(up.Addr())
	r := getRoute("cached", "/c/{p...}", "app")
	r.Methods = []string{"GET", "HEAD", "POST"}
	r.RequestClass, r.Idempotency = "write", "none"
	r.Cache = &rc
	c.Routes = []snapshot.Route{r, getRoute("plain", "/plain", "app")}
	if mod != nil {
		mod(c)
	}
	l.apply(c)
	return l
}

func doGet(t *testing.T, c *http.Client, url string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestCacheDirectives: two GETs of one URL; the upstream counts how many
// reached it for each response Cache-Control (RFC 9111 shared cache).
func TestCacheDirectives(t *testing.T) {
	cases := []struct {
		name    string
		hdr     map[string]string
		status  int
		reqHdr  []string
		upCount int    // upstream requests for two GETs
		second  string // a substring of the second answer's Cache-Status
	}{
		{"default ttl", nil, 200, nil, 1, "hit; ttl="},
		{"max-age", map[string]string{"Cache-Control": "max-age=60"}, 200, nil, 1, "hit; ttl=5"},
		{"s-maxage", map[string]string{"Cache-Control": "s-maxage=60, max-age=0"}, 200, nil, 1, "hit"},
		{"max-age=0", map[string]string{"Cache-Control": "max-age=0"}, 200, nil, 2, "fwd=miss; detail=stale"},
		{"no-store", map[string]string{"Cache-Control": "no-store"}, 200, nil, 2, "detail=no-store"},
		{"private", map[string]string{"Cache-Control": "private, max-age=60"}, 200, nil, 2, "detail=private"},
		{"no-cache", map[string]string{"Cache-Control": "no-cache", "ETag": `"x"`}, 200, nil, 2, "fwd=stale"},
		{"max-age=0 with etag", map[string]string{"Cache-Control": "max-age=0", "ETag": `"x"`}, 200, nil, 2, "fwd=stale"},
		{"must-revalidate fresh", map[string]string{"Cache-Control": "max-age=60, must-revalidate"}, 200, nil, 1, "hit"},
		{"expires future", map[string]string{"Expires": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, 200, nil, 1, "hit"},
		{"expires past", map[string]string{"Expires": "Thu, 01 Jan 1970 00:00:00 GMT"}, 200, nil, 2, "fwd=miss; detail=stale"},
		{"expires invalid", map[string]string{"Expires": "0"}, 200, nil, 2, "fwd=miss; detail=stale"},
		{"set-cookie", map[string]string{"Set-Cookie": "a=b", "Cache-Control": "max-age=60"}, 200, nil, 2, "detail=set-cookie"},
		{"vary star", map[string]string{"Vary": "*", "Cache-Control": "max-age=60"}, 200, nil, 2, "detail=vary-star"},
		{"500 not stored", map[string]string{"Cache-Control": "max-age=60"}, 500, nil, 2, "detail=status"},
		{"404 stored", map[string]string{"Cache-Control": "max-age=60"}, 404, nil, 1, "hit"},
		{"request no-cache", map[string]string{"Cache-Control": "max-age=60"}, 200, []string{"Cache-Control", "no-cache"}, 2, "fwd=request"},
		{"request no-store", map[string]string{"Cache-Control": "max-age=60"}, 200, []string{"Cache-Control", "no-store"}, 2, "detail=request-no-store"},
		{"authorization without public", map[string]string{"Cache-Control": "max-age=60"}, 200, []string{"Authorization", "Bearer x"}, 2, "detail=authorization"},
		{"authorization with public", map[string]string{"Cache-Control": "public, max-age=60"}, 200, []string{"Authorization", "Bearer x"}, 1, "hit"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.hdr {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, "body")
			})
			l := cacheLab(t, up, snapshot.RouteCache{}, nil)
			c := l.h1()
			url := l.url("http", fmt.Sprintf("/c/%d", i))
			_, b1, h1 := doGet(t, c, url, tc.reqHdr...)
			_, b2, h2 := doGet(t, c, url, tc.reqHdr...)
			if b1 != "body" || b2 != "body" {
				t.Fatalf("bodies %q %q", b1, b2)
			}
			if got := up.Count(); got != tc.upCount {
				t.Errorf("upstream saw %d requests, want %d (Cache-Status %q then %q)", got, tc.upCount, h1.Get("Cache-Status"), h2.Get("Cache-Status"))
			}
			if cs := h2.Get("Cache-Status"); !strings.Contains(cs, tc.second) || !strings.HasPrefix(cs, "rampart; ") {
				t.Errorf("second Cache-Status %q, want it to contain %q", cs, tc.second)
			}
		})
	}
}

func TestCacheHitHeadersAndConditional(t *testing.T) {
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=100")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Age", "10")
		_, _ = io.WriteString(w, "hello")
	})
	l := cacheLab(t, up, snapshot.RouteCache{}, nil)
	c := l.h1()
	_, _, h := doGet(t, c, l.url("http", "/c/x"))
	if cs := h.Get("Cache-Status"); cs != "rampart; fwd=miss; stored" {
		t.Fatalf("miss Cache-Status %q", cs)
	}
	_, body, h := doGet(t, c, l.url("http", "/c/x"))
	if body != "hello" || h.Get("X-Upstream") != "app" || h.Get("X-Request-Id") == "" {
		t.Fatalf("hit: %q %v", body, h)
	}
	if age := h.Get("Age"); age != "10" && age != "11" {
		t.Fatalf("Age %q, want the upstream's 10 plus the time stored", age)
	}
	if cs := h.Get("Cache-Status"); !strings.HasPrefix(cs, "rampart; hit; ttl=") {
		t.Fatalf("hit Cache-Status %q", cs)
	}
	code, body, _ := doGet(t, c, l.url("http", "/c/x"), "If-None-Match", `"v1"`)
	if code != http.StatusNotModified || body != "" {
		t.Fatalf("conditional hit: %d %q", code, body)
	}
	// HEAD is answered from the GET's object, without a body.
	resp, err := c.Head(l.url("http", "/c/x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Cache-Status"), "hit") {
		t.Fatalf("HEAD Cache-Status %q", resp.Header.Get("Cache-Status"))
	}
	if up.Count() != 1 {
		t.Fatalf("upstream saw %d requests, want 1", up.Count())
	}
	// A POST to the URL invalidates it (RFC 9111 4.4).
	pr, err := c.Post(l.url("http", "/c/x"), "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	pr.Body.Close()
	_, _, h = doGet(t, c, l.url("http", "/c/x"))
	if cs := h.Get("Cache-Status"); !strings.Contains(cs, "fwd=miss") {
		t.Fatalf("after POST Cache-Status %q, want a miss", cs)
	}
}

func TestCacheRevalidation304(t *testing.T) {
	var conditional atomic.Int32
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=0")
		w.Header().Set("ETag", `"e1"`)
		if r.Header.Get("If-None-Match") == `"e1"` {
			conditional.Add(1)
			w.Header().Set("Cache-Control", "max-age=60")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = io.WriteString(w, "v1")
	})
	l := cacheLab(t, up, snapshot.RouteCache{}, nil)
	c := l.h1()
	doGet(t, c, l.url("http", "/c/r"))
	code, body, h := doGet(t, c, l.url("http", "/c/r"))
	if code != 200 || body != "v1" || conditional.Load() != 1 {
		t.Fatalf("revalidated answer %d %q (conditional requests %d)", code, body, conditional.Load())
	}
	if cs := h.Get("Cache-Status"); !strings.Contains(cs, "fwd-status=304") {
		t.Fatalf("Cache-Status %q", cs)
	}
	// The 304's max-age=60 made the object fresh again.
	_, _, h = doGet(t, c, l.url("http", "/c/r"))
	if cs := h.Get("Cache-Status"); !strings.Contains(cs, "hit") || up.Count() != 2 {
		t.Fatalf("after refresh Cache-Status %q, upstream %d", cs, up.Count())
	}
	if up.Last().Header.Get("If-None-Match") == "" {
		t.Fatal("revalidation was not conditional")
	}
}

func TestCacheVary(t *testing.T) {
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Vary", "Accept-Language")
		_, _ = io.WriteString(w, "lang="+r.Header.Get("Accept-Language"))
	})
	l := cacheLab(t, up, snapshot.RouteCache{}, nil)
	c := l.h1()
	u := l.url("http", "/c/v")
	if _, b, _ := doGet(t, c, u, "Accept-Language", "en"); b != "lang=en" {
		t.Fatal(b)
	}
	if _, b, _ := doGet(t, c, u, "Accept-Language", "de"); b != "lang=de" {
		t.Fatalf("de got %q", b)
	}
	if _, b, h := doGet(t, c, u, "Accept-Language", "EN"); b != "lang=en" || !strings.Contains(h.Get("Cache-Status"), "hit") {
		t.Fatalf("normalised en got %q %q", b, h.Get("Cache-Status"))
	}
	if up.Count() != 2 {
		t.Fatalf("upstream %d, want 2", up.Count())
	}
}

func TestCacheTenantIsolation(t *testing.T) {
	keys := map[string]string{"key-acme": "acme", "key-globex": "globex"}
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		_, _ = io.WriteString(w, "for "+r.Header.Get("X-Rampart-Tenant"))
	})
	mod := func(shared bool) func(c *snapshot.Config) {
		return func(c *snapshot.Config) {
			var ks []snapshot.APIKey
			for k, tenant := range keys {
				sum := sha256.Sum256([]byte(k))
				ks = append(ks, snapshot.APIKey{ID: tenant, SHA256: hex.EncodeToString(sum[:]), Tenant: tenant})
			}
			c.AuthPolicies = []snapshot.AuthPolicy{{ID: "keys", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{Keys: ks}}}
			c.Routes[0].AuthPolicyID = "keys"
			c.Routes[0].Cache.Shared = shared
		}
	}
	l := cacheLab(t, up, snapshot.RouteCache{}, mod(false))
	c := l.h1()
	u := l.url("http", "/c/t")
	_, a, _ := doGet(t, c, u, "X-Api-Key", "key-acme")
	_, g, _ := doGet(t, c, u, "X-Api-Key", "key-globex")
	_, a2, h := doGet(t, c, u, "X-Api-Key", "key-acme")
	if a != "for acme" || g != "for globex" || a2 != "for acme" || !strings.Contains(h.Get("Cache-Status"), "hit") {
		t.Fatalf("per tenant: %q %q %q (%s)", a, g, a2, h.Get("Cache-Status"))
	}
	if code, _, _ := doGet(t, c, u); code != http.StatusUnauthorized {
		t.Fatalf("no key: %d, want 401 before the cache", code)
	}
	// shared: true serves one object to every tenant.
	up2 := startUpstream(t, "app", up.Config.Handler.(http.HandlerFunc))
	l2 := cacheLab(t, up2, snapshot.RouteCache{}, mod(true))
	c2 := l2.h1()
	u2 := l2.url("http", "/c/t")
	_, a, _ = doGet(t, c2, u2, "X-Api-Key", "key-acme")
	_, g, _ = doGet(t, c2, u2, "X-Api-Key", "key-globex")
	if a != "for acme" || g != "for acme" {
		t.Fatalf("shared: %q %q", a, g)
	}
}

func TestCacheCoalescing(t *testing.T) {
	release := make(chan struct{})
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Cache-Control", "max-age=60")
		_, _ = io.WriteString(w, "one")
	})
	l := cacheLab(t, up, snapshot.RouteCache{}, nil)
	c := l.h1()
	c.Transport.(*http.Transport).MaxIdleConnsPerHost = 128
	const n = 100
	var wg sync.WaitGroup
	bodies := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(l.url("http", "/c/co"))
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bodies[i] = string(b)
		}()
	}
	coalesced := l.p.metrics.stage.CoalescedCounter("cached")
	eventually(t, 20*time.Second, "99 requests waiting for the first", func() bool { return testutil.ToFloat64(coalesced) == n-1 })
	close(release)
	wg.Wait()
	for i, b := range bodies {
		if b != "one" {
			t.Fatalf("request %d got %q", i, b)
		}
	}
	if up.Count() != 1 {
		t.Fatalf("upstream saw %d requests, want 1", up.Count())
	}
}

func TestCacheStaleIfErrorUpstreamDies(t *testing.T) {
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=0")
		_, _ = io.WriteString(w, "kept")
	})
	l := cacheLab(t, up, snapshot.RouteCache{StaleIfErrorMs: 600_000}, nil)
	c := l.h1()
	u := l.url("http", "/c/s")
	doGet(t, c, u)
	up.Close() // the upstream dies
	code, body, h := doGet(t, c, u)
	if code != 200 || body != "kept" || !strings.Contains(h.Get("Cache-Status"), "detail=stale-if-error") {
		t.Fatalf("dead upstream: %d %q %q", code, body, h.Get("Cache-Status"))
	}
	// Without the window the failure goes to the client.
	up2 := startUpstream(t, "app", up.Config.Handler.(http.HandlerFunc))
	l2 := cacheLab(t, up2, snapshot.RouteCache{}, nil)
	doGet(t, l2.h1(), l2.url("http", "/c/s"))
	up2.Close()
	if code, _, _ := doGet(t, l2.h1(), l2.url("http", "/c/s")); code < 500 {
		t.Fatalf("no stale-if-error: %d, want a 5xx", code)
	}
}

func TestCacheStaleWhileRevalidate(t *testing.T) {
	var n atomic.Int32
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=0")
		fmt.Fprintf(w, "v%d", n.Add(1))
	})
	l := cacheLab(t, up, snapshot.RouteCache{StaleWhileRevalidateMs: 600_000}, nil)
	c := l.h1()
	u := l.url("http", "/c/w")
	doGet(t, c, u)
	_, body, h := doGet(t, c, u)
	if body != "v1" || !strings.Contains(h.Get("Cache-Status"), "stale-while-revalidate") {
		t.Fatalf("stale answer %q %q", body, h.Get("Cache-Status"))
	}
	eventually(t, 20*time.Second, "the background revalidation", func() bool { return up.Count() == 2 })
	eventually(t, 20*time.Second, "the revalidated object", func() bool {
		_, b, _ := doGet(t, c, u)
		return b != "v1"
	})
}

func TestCacheLargeObjectStreamsThrough(t *testing.T) {
	big := strings.Repeat("z", 64<<10)
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		}
		_, _ = io.WriteString(w, big)
	})
	l := cacheLab(t, up, snapshot.RouteCache{MaxObjectBytes: 1024}, nil)
	c := l.h1()
	for _, q := range []string{"", "?chunked=1"} {
		u := l.url("http", "/c/big"+q)
		_, b1, h1 := doGet(t, c, u)
		_, b2, _ := doGet(t, c, u)
		if b1 != big || b2 != big {
			t.Fatalf("%s: body lengths %d %d", q, len(b1), len(b2))
		}
		if q == "" && !strings.Contains(h1.Get("Cache-Status"), "detail=too-large") {
			t.Fatalf("Cache-Status %q", h1.Get("Cache-Status"))
		}
	}
	if up.Count() != 4 {
		t.Fatalf("upstream saw %d, want 4 (nothing stored)", up.Count())
	}
}

// TestCachePurgeAcrossTwoProxies: two proxies watch one purge document;
// after a purge rule both miss the purged object and keep the others.
func TestCachePurgeAcrossTwoProxies(t *testing.T) {
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=600")
		if strings.HasSuffix(r.URL.Path, "/tagged") {
			w.Header().Set("Surrogate-Key", "blog post-1")
		}
		_, _ = io.WriteString(w, "x")
	})
	priv, pub := signingKeys(t)
	path := filepath.Join(t.TempDir(), "purge.json")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var labs []*lab
	for range 2 {
		l := cacheLab(t, up, snapshot.RouteCache{}, nil)
		w, err := purgewatch.New(purgewatch.Config{Path: path, PublicKey: pub, Store: l.p.CacheStore,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = w.Run(ctx) }()
		labs = append(labs, l)
	}
	status := func(l *lab, p string) string {
		_, _, h := doGet(t, l.h1(), l.url("http", p))
		return h.Get("Cache-Status")
	}
	for _, l := range labs {
		for _, p := range []string{"/c/a", "/c/b", "/c/tagged"} {
			status(l, p)
			if cs := status(l, p); !strings.Contains(cs, "hit") {
				t.Fatalf("warm %s: %q", p, cs)
			}
		}
	}
	var doc *purge.Document
	publish := func(route, prefix, sk string) {
		doc = purge.Append(doc, time.Now(), route, prefix, sk)
		f, err := purge.Build(priv, doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := envelope.WriteFileAtomic(path, f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missed := func(l *lab, p string) func() bool {
		return func() bool { return strings.Contains(status(l, p), "fwd=miss") }
	}
	publish("", "127.0.0.1/c/a", "") // by key prefix (host as routed, without the port)
	for _, l := range labs {
		eventually(t, 20*time.Second, "prefix purge on every proxy", missed(l, "/c/a"))
		if cs := status(l, "/c/b"); !strings.Contains(cs, "hit") {
			t.Fatalf("prefix purge took /c/b too: %q", cs)
		}
	}
	publish("", "", "post-1") // by surrogate key
	for _, l := range labs {
		eventually(t, 20*time.Second, "surrogate purge on every proxy", missed(l, "/c/tagged"))
	}
	publish("cached", "", "") // by route
	for _, l := range labs {
		eventually(t, 20*time.Second, "route purge on every proxy", missed(l, "/c/b"))
	}
}

// TestCachePurgeDuringFetch: a purge published while a miss is being
// fetched must not let that response be stored: the next request is a
// miss again (upstream sees 2), and the refusal is counted.
func TestCachePurgeDuringFetch(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-release
		}
		w.Header().Set("Cache-Control", "max-age=600")
		_, _ = io.WriteString(w, "v")
	})
	priv, pub := signingKeys(t)
	path := filepath.Join(t.TempDir(), "purge.json")
	l := cacheLab(t, up, snapshot.RouteCache{}, nil)
	applied := make(chan int, 4)
	w, err := purgewatch.New(purgewatch.Config{Path: path, PublicKey: pub, Store: l.p.CacheStore,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnApply: func(_ purge.Rule, n int) { applied <- n }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = w.Run(ctx) }()
	first := make(chan string, 1)
	go func() {
		_, _, h := doGet(t, l.h1(), l.url("http", "/c/slow"))
		first <- h.Get("Cache-Status")
	}()
	eventually(t, 20*time.Second, "the first request reaching the upstream", func() bool { return calls.Load() == 1 })
	f, err := purge.Build(priv, purge.Append(nil, time.Now(), "cached", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(path, f, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-applied:
		if n != 0 {
			t.Fatalf("the purge removed %d objects, want 0 (nothing stored yet)", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the purge was not applied")
	}
	close(release)
	if cs := <-first; !strings.Contains(cs, "fwd=miss") {
		t.Fatalf("first request: Cache-Status %q", cs)
	}
	if _, _, h := doGet(t, l.h1(), l.url("http", "/c/slow")); !strings.Contains(h.Get("Cache-Status"), "fwd=miss") {
		t.Fatalf("after the purge: Cache-Status %q, want a miss (the purged fetch was stored)", h.Get("Cache-Status"))
	}
	if calls.Load() != 2 || l.p.CacheStore().PurgeRefused() != 1 {
		t.Fatalf("upstream saw %d requests (want 2); refused %d (want 1)", calls.Load(), l.p.CacheStore().PurgeRefused())
	}
	// The third request hits what the second stored.
	if _, _, h := doGet(t, l.h1(), l.url("http", "/c/slow")); !strings.Contains(h.Get("Cache-Status"), "hit") {
		t.Fatalf("third request: Cache-Status %q, want a hit", h.Get("Cache-Status"))
	}
}

// TestCacheUncacheableSkipsCoalescing: once a key's response said
// no-store, its concurrent misses go upstream together instead of queueing
// behind one fetch (hit-for-miss); a later storable answer is stored again.
func TestCacheUncacheableSkipsCoalescing(t *testing.T) {
	var cacheable atomic.Bool
	var hold atomic.Bool
	release := make(chan struct{})
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		if hold.Load() {
			<-release
		}
		if cacheable.Load() {
			w.Header().Set("Cache-Control", "max-age=60")
		} else {
			w.Header().Set("Cache-Control", "no-store")
		}
		_, _ = io.WriteString(w, "x")
	})
	l := cacheLab(t, up, snapshot.RouteCache{}, nil)
	c := l.h1()
	if _, _, h := doGet(t, c, l.url("http", "/c/p")); !strings.Contains(h.Get("Cache-Status"), "detail=no-store") {
		t.Fatalf("first answer: %q", h.Get("Cache-Status"))
	}
	hold.Store(true)
	const n = 10
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			doGet(t, c, l.url("http", "/c/p"))
		}()
	}
	// Coalesced requests would leave one upstream request waiting and
	// this condition false until the deadline.
	eventually(t, 20*time.Second, "all concurrent misses reaching the upstream", func() bool { return up.Count() == 1+n })
	close(release)
	wg.Wait()
	if got := testutil.ToFloat64(l.p.metrics.stage.CoalescedCounter("cached")); got != 0 {
		t.Fatalf("%v requests coalesced behind an uncacheable key, want 0", got)
	}
	hold.Store(false)
	cacheable.Store(true)
	if _, _, h := doGet(t, c, l.url("http", "/c/p")); !strings.Contains(h.Get("Cache-Status"), "stored") {
		t.Fatalf("a storable answer after the mark: %q", h.Get("Cache-Status"))
	}
	if _, _, h := doGet(t, c, l.url("http", "/c/p")); !strings.Contains(h.Get("Cache-Status"), "hit") {
		t.Fatalf("after it was stored: %q", h.Get("Cache-Status"))
	}
}

// signingKeys is a fresh Ed25519 key pair for signed documents.
func signingKeys(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	privPEM, pubPEM, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := envelope.ParsePrivateKey(privPEM)
	pub, _ := envelope.ParsePublicKey(pubPEM)
	return priv, pub
}
