package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestHTTPSServesHTTP1AndHTTP2(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("users", "/v1/users/{id}", "app")}
	l.apply(c)

	for _, tc := range []struct {
		name   string
		client *http.Client
		proto  string
	}{{"h1", l.h1(), "HTTP/1.1"}, {"h2", l.h2(), "HTTP/2.0"}} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, resp := get(t, tc.client, l.url("https", "/v1/users/42?x=1"))
			if code != 200 || body != "app /v1/users/42" {
				t.Fatalf("got %d %q", code, body)
			}
			if resp.Proto != tc.proto {
				t.Errorf("proto %s, want %s", resp.Proto, tc.proto)
			}
			if resp.TLS == nil || resp.TLS.Version != 0x0304 {
				t.Errorf("want TLS 1.3, got %+v", resp.TLS)
			}
			if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Upstream") != "app" {
				t.Errorf("response headers %v", resp.Header)
			}
			r := up.Last()
			if r.URL.RawQuery != "x=1" || r.Header.Get("X-Forwarded-Proto") != "https" ||
				r.Header.Get("X-Forwarded-For") != "127.0.0.1" || r.Header.Get("X-Forwarded-Host") != l.addr("https") ||
				r.Header.Get("X-Request-Id") != resp.Header.Get("X-Request-Id") || r.Header.Get("X-Rampart-Timeout-Ms") == "" {
				t.Errorf("upstream saw query %q headers %v", r.URL.RawQuery, r.Header)
			}
		})
	}
}

func TestPlainHTTPListener(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("any", "/{rest...}", "app")}
	l.apply(c)
	code, body, _ := get(t, http.DefaultClient, l.url("http", "/a/b/"))
	if code != 200 || body != "app /a/b/" {
		t.Fatalf("got %d %q", code, body)
	}
	if got := up.Last().Header.Get("X-Forwarded-Proto"); got != "http" {
		t.Errorf("X-Forwarded-Proto %q", got)
	}
}

func TestRequestIDKeptOrGenerated(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("any", "/{rest...}", "app")}
	l.apply(c)
	for _, tc := range []struct{ in, keep string }{
		{"abc-123", "abc-123"},
		{"has space", ""},
		{strings.Repeat("x", 129), ""},
		{"", ""},
	} {
		req, _ := http.NewRequest("GET", l.url("http", "/x"), nil)
		if tc.in != "" {
			req.Header.Set("X-Request-Id", tc.in)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Request-Id")
		if tc.keep != "" && got != tc.keep || tc.keep == "" && (got == "" || got == tc.in) {
			t.Errorf("in %q: response id %q", tc.in, got)
		}
		if up.Last().Header.Get("X-Request-Id") != got {
			t.Errorf("upstream saw %q, client got %q", up.Last().Header.Get("X-Request-Id"), got)
		}
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("users", "/v1/users/{id}", "app"),
		{ID: "create", Host: "*", Methods: []string{"POST"}, PathTemplate: "/v1/users/{id}", UpstreamCluster: "app",
			TimeoutMs: 100, Idempotency: "none"}}
	l.apply(c)

	code, body, resp := get(t, http.DefaultClient, l.url("http", "/v2/nothing"))
	if code != 404 || !strings.Contains(body, "request id "+resp.Header.Get("X-Request-Id")) {
		t.Errorf("404 case: %d %q", code, body)
	}
	req, _ := http.NewRequest("DELETE", l.url("http", "/v1/users/7"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Errorf("405 case: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if up.Count() != 0 {
		t.Errorf("upstream got %d requests for unroutable ones", up.Count())
	}
	if n := testutil.ToFloat64(l.p.metrics.unmatched.WithLabelValues("405")); n != 1 {
		t.Errorf("unmatched 405 = %v", n)
	}
}

func TestPathsAreNormalisedBeforeMatching(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	admin := startUpstream(t, "admin", nil)
	c := l.config(up.Addr())
	c.Clusters = append(c.Clusters, clusterOf("admin", admin.Addr()))
	c.Routes = []snapshot.Route{getRoute("public", "/public/{rest...}", "app"), getRoute("admin", "/admin/{rest...}", "admin")}
	l.apply(c)
	for _, tc := range []struct {
		path     string
		code     int
		upstream string
	}{
		{"/public/a", 200, "app /public/a"},
		{"/public//a/./b", 200, "app /public/a/b"},
		{"/public/%61", 200, "app /public/a"},
		{"/admin/../public/x", 200, "app /public/x"},
		{"/public/%2e%2e/admin/x", 200, "admin /admin/x"},
		{"/public/..%2Fadmin/x", 400, ""},
		{"/public/a%5Cb", 400, ""},
		{"/public/%zz", 400, ""},
	} {
		req, _ := http.NewRequest("GET", l.url("http", "/"), nil)
		req.URL.Opaque = tc.path // send the path exactly as written
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || (tc.upstream != "" && string(b) != tc.upstream) {
			t.Errorf("%s: got %d %q, want %d %q", tc.path, resp.StatusCode, b, tc.code, tc.upstream)
		}
	}
}

func TestHostSelection(t *testing.T) {
	l := newLab(t)
	exact := startUpstream(t, "exact", nil)
	wild := startUpstream(t, "wild", nil)
	anyh := startUpstream(t, "any", nil)
	c := l.config()
	c.Clusters = []snapshot.Cluster{clusterOf("exact", exact.Addr()), clusterOf("wild", wild.Addr()), clusterOf("any", anyh.Addr())}
	r1, r2, r3 := getRoute("exact", "/x", "exact"), getRoute("wild", "/x", "wild"), getRoute("any", "/x", "any")
	r1.Host, r2.Host = "api.example.com", "*.example.com"
	c.Routes = []snapshot.Route{r1, r2, r3}
	l.apply(c)
	for host, want := range map[string]string{
		"api.example.com": "exact", "API.Example.com:8080": "exact", "www.example.com": "wild",
		"a.b.example.com": "wild", "example.com": "any", "other.org": "any",
	} {
		req, _ := http.NewRequest("GET", l.url("http", "/x"), nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Upstream"); got != want {
			t.Errorf("host %s went to %q, want %q", host, got, want)
		}
	}
}

func TestCanarySplitWithinTolerance(t *testing.T) {
	l := newLab(t)
	stable := startUpstream(t, "stable", nil)
	canary := startUpstream(t, "canary", nil)
	c := l.config()
	c.Clusters = []snapshot.Cluster{clusterOf("users", stable.Addr()), clusterOf("users-canary", canary.Addr())}
	r := getRoute("users", "/u", "users")
	r.TimeoutMs = 30000 // a liveness bound: one slow exchange on a busy box is not what this test is about
	r.TrafficSplit = []snapshot.Split{{Revision: "users", Weight: 90}, {Revision: "users-canary", Weight: 10}}
	c.Routes = []snapshot.Route{r}
	l.apply(c)
	const n = 4000
	client := l.h2()
	for i := 0; i < n; i++ {
		if code, _, _ := get(t, client, l.url("https", "/u")); code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	// Binomial(4000, 0.1): mean 400, sd 19; allow 5 sd.
	got := canary.Count()
	if got < 400-95 || got > 400+95 || stable.Count()+got != n {
		t.Fatalf("canary got %d of %d (stable %d), want 400 ± 95", got, n, stable.Count())
	}
	t.Logf("canary share %.2f%% over %d requests (weight 10%%)", 100*float64(got)/n, n)
	m := testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("users", "users-canary", "200"))
	if int(m) != got {
		t.Errorf("metric says %v canary requests, upstream %d", m, got)
	}
}

func TestSmoothWeightedRoundRobin(t *testing.T) {
	l := newLab(t)
	a := startUpstream(t, "a", nil)
	b := startUpstream(t, "b", nil)
	c := l.config()
	cl := clusterOf("app", a.Addr(), b.Addr())
	cl.Endpoints[0].Weight = 3
	c.Clusters = []snapshot.Cluster{cl}
	c.Routes = []snapshot.Route{getRoute("any", "/x", "app")}
	l.apply(c)
	var seq strings.Builder
	for i := 0; i < 8; i++ {
		_, _, resp := get(t, http.DefaultClient, l.url("http", "/x"))
		seq.WriteString(resp.Header.Get("X-Upstream"))
	}
	// Weight 3:1, interleaved: each window of 4 has three a and one b.
	if got := seq.String(); got != "abaaabaa" && strings.Count(got, "b") != 2 {
		t.Fatalf("sequence %s", got)
	}
	if a.Count() != 6 || b.Count() != 2 {
		t.Fatalf("a %d b %d, want 6 and 2", a.Count(), b.Count())
	}
}

func TestSNISelectsCertificate(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("any", "/x", "app")}
	l.apply(c)
	// The lab certificate covers localhost and *.localhost; an unknown SNI
	// gets the default (the same one here), so the handshake must verify
	// for names it covers.
	for _, name := range []string{"localhost", "api.localhost"} {
		cl := l.h1()
		cl.Transport.(*http.Transport).TLSClientConfig.ServerName = name
		if code, _, _ := get(t, cl, l.url("https", "/x")); code != 200 {
			t.Errorf("SNI %s: %d", name, code)
		}
	}
	_ = fmt.Sprint()
}
