package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// oneCluster applies a config with cluster "app" (endpoints as given,
// settings adjusted by tune) and a route /x (adjusted by route).
func oneCluster(l *lab, tune func(c *snapshot.Cluster), route func(r *snapshot.Route), addrs ...string) {
	c := l.config(addrs...)
	if tune != nil {
		tune(&c.Clusters[0])
	}
	r := getRoute("r", "/{rest...}", "app")
	if route != nil {
		route(&r)
	}
	c.Routes = []snapshot.Route{r}
	l.apply(c)
}

func status(t *testing.T, url string) (int, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestBreakerMaxRequestsShedsAtOnce(t *testing.T) {
	l := newLab(t)
	release := make(chan struct{})
	up := startUpstream(t, "slow", func(w http.ResponseWriter, r *http.Request) { <-release })
	oneCluster(l, func(c *snapshot.Cluster) { c.CircuitBreaker.MaxRequests = 2 }, nil, up.Addr())
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); status(t, l.url("http", "/x")) }()
	}
	eventually(t, 30*time.Second, "two requests at the upstream", func() bool { return up.Count() == 2 })
	// The answer must not queue: it comes while both requests are still
	// held at the upstream (release is closed only after it). The client
	// timeout is a liveness bound, not a speed bound.
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(l.url("http", "/x"))
	if err != nil {
		t.Fatalf("third request, with two held at the upstream: %v", err)
	}
	resp.Body.Close()
	if code, h := resp.StatusCode, resp.Header; code != 503 || h.Get("Retry-After") == "" {
		t.Fatalf("third request: %d Retry-After %q, want 503 with Retry-After", code, h.Get("Retry-After"))
	}
	close(release)
	wg.Wait()
	if n := testutil.ToFloat64(l.p.metrics.shed.WithLabelValues("breaker")); n != 1 {
		t.Errorf("shed{breaker} = %v", n)
	}
	if n := testutil.ToFloat64(l.p.metrics.faults.WithLabelValues("r", "upstream")); n != 1 {
		t.Errorf("a breaker 503 is the upstream's fault; got %v", n)
	}
	// The breaker closes again once requests finish.
	if code, _ := status(t, l.url("http", "/x")); code != 200 {
		t.Fatalf("after the burst: %d", code)
	}
}

func TestBreakerMaxConnectionsAndPending(t *testing.T) {
	l := newLab(t)
	release := make(chan struct{})
	up := startUpstream(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
	})
	oneCluster(l, func(c *snapshot.Cluster) {
		c.CircuitBreaker.MaxConnections = 1
		c.CircuitBreaker.MaxPending = 1
	}, func(r *snapshot.Route) { r.TimeoutMs = 5000 }, up.Addr())
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	wg.Add(1)
	go func() { defer wg.Done(); c, _ := status(t, l.url("http", "/hold")); codes <- c }()
	eventually(t, 30*time.Second, "the first request to hold the only connection", func() bool { return up.Count() == 1 })
	wg.Add(1)
	go func() { defer wg.Done(); c, _ := status(t, l.url("http", "/waits")); codes <- c }() // pending: waits
	cs := l.p.clusters.Limiter("app")
	eventually(t, 30*time.Second, "one pending request", func() bool { return cs.Pending() == 1 })
	if code, _ := status(t, l.url("http", "/third")); code != 503 {
		t.Fatalf("over max_pending: %d, want 503", code)
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("admitted request got %d", c)
		}
	}
	if n := testutil.ToFloat64(l.p.metrics.shed.WithLabelValues("connections")); n != 1 {
		t.Errorf("shed{connections} = %v", n)
	}
	if open := cs.Open(); open > 1 {
		t.Errorf("%d connections open, limit 1", open)
	}
}

func TestOutlierEjectionAndReturn(t *testing.T) {
	l := newLab(t)
	var failing atomic.Bool
	failing.Store(true)
	bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(500)
		}
	})
	good := startUpstream(t, "good", nil)
	oneCluster(l, func(c *snapshot.Cluster) {
		// 5 s: the 20 requests below must fit in the ejection even on a busy box.
		c.Outlier = snapshot.Outlier{Consecutive5xx: 3, BaseEjectionMs: 5000, MaxEjectionMs: 5000, MaxEjectionPercent: 50}
	}, nil, bad.Addr(), good.Addr())
	for i := 0; i < 20; i++ {
		status(t, l.url("http", "/x"))
	}
	if bad.Count() != 3 {
		t.Fatalf("bad endpoint got %d requests, want 3 (ejected after 3 consecutive 5xx)", bad.Count())
	}
	if n := testutil.ToFloat64(l.p.metrics.cluster.OutlierEjections.WithLabelValues("app")); n != 1 {
		t.Fatalf("ejections = %v", n)
	}
	failing.Store(false)
	ep := l.p.Active().clusters["app"].Endpoints()[0]
	eventually(t, 30*time.Second, "the ejection to end", func() bool { _, _, until := ep.Ejection(); return !until.After(time.Now()) })
	for i := 0; i < 10; i++ {
		status(t, l.url("http", "/x"))
	}
	if bad.Count() < 6 {
		t.Fatalf("ejected endpoint did not come back: %d requests", bad.Count())
	}
}

func TestOutlierEjectionGrowsAndIsCapped(t *testing.T) {
	l := newLab(t)
	bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) })
	bad2 := startUpstream(t, "bad2", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) })
	good := startUpstream(t, "good", nil)
	oneCluster(l, func(c *snapshot.Cluster) {
		c.Outlier = snapshot.Outlier{ConsecutiveGatewayErrors: 2, Consecutive5xx: -1, BaseEjectionMs: 200, MaxEjectionMs: 10000, MaxEjectionPercent: 34}
	}, nil, bad.Addr(), bad2.Addr(), good.Addr())
	// 34 % of 3 endpoints: one may be out at a time, so the second bad one
	// keeps taking traffic and its ejection is held back. How many requests
	// that takes depends on the box: a slow one lets a 200 ms ejection end
	// before the other bad endpoint fails twice, but each ejection lasts
	// longer than the one before, so the overlap comes.
	skipped := l.p.metrics.cluster.OutlierSkipped.WithLabelValues("app")
	for deadline := time.Now().Add(30 * time.Second); testutil.ToFloat64(skipped) == 0; { // a liveness bound
		status(t, l.url("http", "/x"))
		if time.Now().After(deadline) {
			t.Fatalf("max_ejection_percent never held an ejection back within 30 s (bad %d, bad2 %d)", bad.Count(), bad2.Count())
		}
	}
	// The first endpoint may be the one held back so far: the loop below
	// waits for its second ejection either way.
	ep := l.p.Active().clusters["app"].Endpoints()[0]
	// Ejected again after it returns: the second ejection lasts twice as
	// long. The loop sends requests until that state shows, however long the
	// first ejection takes to end.
	var n int
	var from, until time.Time
	for deadline := time.Now().Add(30 * time.Second); ; { // a liveness bound
		status(t, l.url("http", "/x"))
		n, from, until = ep.Ejection()
		if n >= 2 && until.After(from) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first endpoint was not ejected a second time within 30 s (%d ejections)", n)
		}
	}
	// State, not speed: the latest ejection lasts base × its number.
	if want := time.Duration(n) * 200 * time.Millisecond; until.Sub(from) != want {
		t.Fatalf("ejection %d lasts %s, want %s", n, until.Sub(from), want)
	}
}

func TestActiveHealthChecks(t *testing.T) {
	l := newLab(t)
	var sick atomic.Bool
	var proxied atomic.Int64 // requests other than health checks
	a := startUpstream(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			proxied.Add(1)
		}
		if r.URL.Path == "/health" && sick.Load() {
			w.WriteHeader(503)
		}
	})
	b := startUpstream(t, "b", nil)
	// The endpoints turn sick by their answer, never by slowness: the check
	// timeout is the production default (1 s, as long as the interval
	// allows), so a loaded box does not fail checks spuriously. A 100 ms
	// timeout did: two late answers from b in a row left no healthy
	// endpoint, and a late answer from a counted an extra transition.
	oneCluster(l, func(c *snapshot.Cluster) {
		c.HealthCheck = &snapshot.HealthCheck{Path: "/health", IntervalMs: 1000, TimeoutMs: 1000, JitterMs: 10, HealthyThreshold: 2, UnhealthyThreshold: 2}
	}, nil, a.Addr(), b.Addr())
	m := l.p.metrics.cluster
	eventually(t, 30*time.Second, "checks to run", func() bool {
		return testutil.ToFloat64(m.HealthChecks.WithLabelValues("app", "pass")) >= 2
	})
	sick.Store(true)
	eventually(t, 30*time.Second, "a to turn unhealthy", func() bool {
		return testutil.ToFloat64(m.EndpointHealthy.WithLabelValues("app", a.Addr())) == 0
	})
	before := proxied.Load()
	for i := 0; i < 10; i++ {
		if code, _ := status(t, l.url("http", "/x")); code != 200 {
			t.Fatalf("%d", code)
		}
	}
	// Health checks keep arriving (how many depends on the box's speed);
	// requests must not.
	if got := proxied.Load() - before; got != 0 {
		t.Fatalf("unhealthy endpoint took %d requests", got)
	}
	sick.Store(false)
	eventually(t, 30*time.Second, "a to recover", func() bool {
		return testutil.ToFloat64(m.EndpointHealthy.WithLabelValues("app", a.Addr())) == 1
	})
	if testutil.ToFloat64(m.HealthTransitions.WithLabelValues("app", "unhealthy")) != 1 ||
		testutil.ToFloat64(m.HealthTransitions.WithLabelValues("app", "healthy")) != 1 {
		t.Error("transitions not counted once each")
	}
	_ = b
}

// Health, ejection and breaker state survive a snapshot swap that keeps
// the cluster and the endpoint.
func TestEndpointStateSurvivesSwap(t *testing.T) {
	l := newLab(t)
	bad := startUpstream(t, "bad", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	good := startUpstream(t, "good", nil)
	tune := func(c *snapshot.Cluster) {
		c.Outlier = snapshot.Outlier{Consecutive5xx: 2, BaseEjectionMs: 60000, MaxEjectionPercent: 50}
	}
	oneCluster(l, tune, nil, bad.Addr(), good.Addr())
	for i := 0; i < 6; i++ {
		status(t, l.url("http", "/x"))
	}
	if bad.Count() != 2 {
		t.Fatalf("bad got %d, want 2 then ejection", bad.Count())
	}
	stateBefore := l.p.Active().clusters["app"].State()
	// A new snapshot: another route, same cluster and endpoints.
	oneCluster(l, tune, func(r *snapshot.Route) { r.TimeoutMs = 3000 }, bad.Addr(), good.Addr())
	if l.p.Active().clusters["app"].State() != stateBefore {
		t.Fatal("cluster state was not carried over")
	}
	for i := 0; i < 6; i++ {
		status(t, l.url("http", "/x"))
	}
	if bad.Count() != 2 {
		t.Fatalf("after the swap the ejected endpoint got traffic again (%d)", bad.Count())
	}
	// Removing the endpoint forgets its state.
	oneCluster(l, tune, nil, good.Addr())
	if l.p.clusters.Tracks("app", bad.Addr()) {
		t.Fatal("state of a removed endpoint kept")
	}
}

func TestSameRegionPreferredAndPanicModes(t *testing.T) {
	l := newLab(t)
	l.setRegion("eu")
	var euSick atomic.Bool
	eu := startUpstream(t, "eu", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && euSick.Load() {
			w.WriteHeader(500)
		}
	})
	us := startUpstream(t, "us", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && euSick.Load() {
			w.WriteHeader(500)
		}
	})
	apply := func(panicMode string) {
		c := l.config()
		c.Clusters = []snapshot.Cluster{{Name: "app", PanicMode: panicMode,
			// One failed check turns an endpoint unhealthy, so a check must
			// fail by its answer only: a 1 s timeout (the default) keeps a
			// loaded box from ejecting eu before the first requests.
			HealthCheck: &snapshot.HealthCheck{Path: "/health", IntervalMs: 1000, TimeoutMs: 1000, HealthyThreshold: 1, UnhealthyThreshold: 1},
			Endpoints:   []snapshot.Endpoint{{Address: eu.Addr(), Region: "eu"}, {Address: us.Addr(), Region: "us"}}}}
		c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
		l.apply(c)
	}
	apply("")
	for i := 0; i < 10; i++ {
		status(t, l.url("http", "/x"))
	}
	if eu.Count()-us.Count() < 8 {
		t.Fatalf("eu %d us %d: the proxy's region should take every request", eu.Count(), us.Count())
	}
	euSick.Store(true) // both fail their checks now
	m := l.p.metrics.cluster
	eventually(t, 30*time.Second, "both unhealthy", func() bool {
		return testutil.ToFloat64(m.EndpointHealthy.WithLabelValues("app", eu.Addr())) == 0 &&
			testutil.ToFloat64(m.EndpointHealthy.WithLabelValues("app", us.Addr())) == 0
	})
	if code, _ := status(t, l.url("http", "/x")); code != 503 {
		t.Fatalf("fail_closed with no healthy endpoint: %d", code)
	}
	if testutil.ToFloat64(m.NoHealthy.WithLabelValues("app", "fail_closed")) != 1 {
		t.Error("panic not counted")
	}
	apply("all_endpoints")
	if code, _ := status(t, l.url("http", "/x")); code != 200 {
		t.Fatalf("all_endpoints with no healthy endpoint: %d", code)
	}
	if testutil.ToFloat64(m.NoHealthy.WithLabelValues("app", "all_endpoints")) != 1 {
		t.Error("panic (all_endpoints) not counted")
	}
}

func TestRetryBudgetCapsRetries(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name       string
		budget     snapshot.RetryBudget
		maxRetries int32 // retries in flight at once
		maxTotal   int
	}{
		{"no budget at all", snapshot.RetryBudget{BudgetPercent: 0, MinRetryConcurrency: 0}, 0, n},
		{"25 percent", snapshot.RetryBudget{BudgetPercent: 25, MinRetryConcurrency: 0}, n / 4, 2 * n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t)
			var arrived, retrying, peak atomic.Int32
			gate := make(chan struct{})
			var once sync.Once
			up := startUpstream(t, "down", func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Rampart-Attempt") != "" {
					now := retrying.Add(1)
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					time.Sleep(20 * time.Millisecond)
					retrying.Add(-1)
				} else if arrived.Add(1) == n {
					once.Do(func() { close(gate) })
				}
				<-gate
				w.WriteHeader(503)
			})
			oneCluster(l, func(c *snapshot.Cluster) {
				c.RetryBudget = &tc.budget
				c.Outlier.Consecutive5xx, c.Outlier.ConsecutiveGatewayErrors = -1, -1
			}, func(r *snapshot.Route) {
				r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 3, RetryableStatuses: []int{503}}
			}, up.Addr())
			var wg sync.WaitGroup
			for i := 0; i < n; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); status(t, l.url("http", "/x")) }()
			}
			wg.Wait()
			if peak.Load() > tc.maxRetries || up.Count() > tc.maxTotal {
				t.Fatalf("peak %d retries in flight (budget %d), %d attempts for %d requests (cap %d; without a budget %d)",
					peak.Load(), tc.maxRetries, up.Count(), n, tc.maxTotal, 3*n)
			}
			exhausted := testutil.ToFloat64(l.p.metrics.cluster.BudgetExhausted.WithLabelValues("app"))
			if exhausted == 0 {
				t.Fatal("budget exhaustion not counted")
			}
			t.Logf("%d attempts for %d requests, peak %d retries in flight, %v retries refused", up.Count(), n, peak.Load(), exhausted)
		})
	}
}

func TestRetryFloorAllowsSequentialRetries(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "down", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	oneCluster(l, func(c *snapshot.Cluster) { c.Outlier.Consecutive5xx, c.Outlier.ConsecutiveGatewayErrors = -1, -1 },
		func(r *snapshot.Route) {
			r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 3, RetryableStatuses: []int{503}}
		}, up.Addr())
	for i := 0; i < 5; i++ {
		status(t, l.url("http", "/x"))
	}
	if up.Count() != 15 {
		t.Fatalf("%d attempts for 5 sequential requests, want 15 (min_retry_concurrency 3 allows them)", up.Count())
	}
}

// A write with an idempotency key and a body is retried with the same body.
func TestKeyedWriteWithBodyIsRetried(t *testing.T) {
	l := newLab(t)
	var bodies []string
	var mu sync.Mutex
	up := startUpstream(t, "flaky", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		first := len(bodies) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(503)
		}
	})
	oneCluster(l, nil, func(r *snapshot.Route) {
		r.Methods, r.RequestClass, r.Idempotency = []string{"POST"}, "write", "key:Idempotency-Key"
		r.RetryPolicy = &snapshot.RetryPolicy{MaxAttempts: 2, RetryableStatuses: []int{503}}
	}, up.Addr())
	for _, chunked := range []bool{false, true} {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		var body io.Reader = strings.NewReader("payment=42")
		if chunked {
			body = io.MultiReader(body)
		}
		req, _ := http.NewRequest("POST", l.url("http", "/pay"), body)
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		got := append([]string(nil), bodies...)
		mu.Unlock()
		if resp.StatusCode != 200 || len(got) != 2 || got[0] != "payment=42" || got[1] != "payment=42" {
			t.Fatalf("chunked=%v: status %d, upstream saw %q", chunked, resp.StatusCode, got)
		}
	}
}
