package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestRetryableStatusGoesToAnotherEndpoint(t *testing.T) {
	l := newLab(t)
	bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	good := startUpstream(t, "good", nil)
	c := l.config(bad.Addr(), good.Addr())
	r := getRoute("r", "/x", "app")
	r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 2, RetryableStatuses: []int{503}}
	c.Routes = []snapshot.Route{r}
	l.apply(c)
	for i := 0; i < 6; i++ {
		if code, _, _ := get(t, http.DefaultClient, l.url("http", "/x")); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	if bad.Count() != 3 || good.Count() != 6 {
		t.Fatalf("bad %d good %d: want 3 and 6 (every other first try hits bad, its retry goes to good)", bad.Count(), good.Count())
	}
}

func TestNoRetryWithoutPolicyOrForUnsafeWrites(t *testing.T) {
	for _, tc := range []struct {
		name      string
		route     func(r *snapshot.Route)
		method    string
		header    string
		wantTries int
	}{
		{"GET without retry policy", func(r *snapshot.Route) {}, "GET", "", 1},
		{"POST with idempotency none", func(r *snapshot.Route) {
			r.Methods, r.RequestClass, r.Idempotency = []string{"POST"}, "write", "none"
		}, "POST", "", 1},
		{"POST with an idempotency key header absent", func(r *snapshot.Route) {
			r.Methods, r.RequestClass, r.Idempotency = []string{"POST"}, "write", "key:Idempotency-Key"
			r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 3, RetryableStatuses: []int{503}}
		}, "POST", "", 1},
		{"POST with an idempotency key, no body", func(r *snapshot.Route) {
			r.Methods, r.RequestClass, r.Idempotency = []string{"POST"}, "write", "key:Idempotency-Key"
			r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 3, RetryableStatuses: []int{503}}
		}, "POST", "k-1", 3},
		{"GET with policy", func(r *snapshot.Route) {
			r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 3, RetryableStatuses: []int{503}}
		}, "GET", "", 3},
		{"GET with policy, other status", func(r *snapshot.Route) {
			r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 3, RetryableStatuses: []int{502}}
		}, "GET", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			up := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
			c := l.config(up.Addr())
			r := getRoute("r", "/x", "app")
			tc.route(&r)
			c.Routes = []snapshot.Route{r}
			l.apply(c)
			req, _ := http.NewRequest(tc.method, l.url("http", "/x"), nil)
			if tc.header != "" {
				req.Header.Set("Idempotency-Key", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 || up.Count() != tc.wantTries {
				t.Fatalf("status %d after %d tries, want 503 after %d", resp.StatusCode, up.Count(), tc.wantTries)
			}
		})
	}
}

// A POST whose body was sent is never repeated, even when the upstream
// resets the connection: it is sent exactly once.
func TestWriteWithBodyIsSentOnceWhenUpstreamResets(t *testing.T) {
	l := newLab(t)
	var got atomic.Int32
	up := startUpstream(t, "reset", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got.Add(1)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	singleRoute(l, up.Addr(), func(r *snapshot.Route) {
		r.Methods, r.RequestClass, r.Idempotency = []string{"POST"}, "write", "none"
	})
	resp, err := http.Post(l.url("http", "/pay"), "text/plain", strings.NewReader("amount=10"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 || got.Load() != 1 {
		t.Fatalf("status %d, upstream saw %d POSTs; want 502 and exactly 1", resp.StatusCode, got.Load())
	}
}

// The upstream closes a keep-alive connection just as the next request
// arrives on it (too late for the pool's idle check to see): the GET is
// replayed on a fresh connection instead of failing.
func TestStaleKeepAliveConnectionIsReplayed(t *testing.T) {
	l := newLab(t)
	addr := newScriptedUpstream(t, func(conn, req int) bool { return req == 1 }, nil)
	singleRoute(l, addr, func(r *snapshot.Route) { r.Methods = []string{"GET"}; r.RequestClass = "read"; r.Idempotency = "safe" })
	for i := 1; i <= 3; i++ {
		if code, body, _ := get(t, http.DefaultClient, l.url("http", "/x")); code != 200 || body != fmt.Sprintf("c%dr1", i) {
			t.Fatalf("request %d: %d %q, want 200 c%dr1", i, code, body, i)
		}
	}
	stale := testutil.ToFloat64(l.p.metrics.upstreamTries.WithLabelValues("app", "stale_connection"))
	if stale != 2 {
		t.Fatalf("%v stale connections replayed, want 2 (requests 2 and 3)", stale)
	}
}

func TestConnectionsAreReused(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	singleRoute(l, up.Addr(), nil)
	for i := 0; i < 50; i++ {
		get(t, http.DefaultClient, l.url("http", "/x"))
	}
	st := l.p.Active().clusters["app"].Endpoints()[0].Pool.Stats()
	if st.Dials != 1 || st.Reuses != 49 {
		t.Fatalf("dials %d reuses %d, want 1 and 49", st.Dials, st.Reuses)
	}
}
