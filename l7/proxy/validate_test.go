package proxy

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func dialTCP(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Fields a client names in Connection are removed as the request arrives:
// naming the identity headers or a header rule's field cannot remove what
// the proxy adds, while a field of the client's own is dropped (HTTP/1.1
// to an HTTP/1.1 upstream).
func TestConnectionCannotStripAddedHeadersH1(t *testing.T) {
	l, up, is := policyLab(t)
	tok := is.token(map[string]any{"scope": "users:read", "tenant": "acme"})
	code := rawH1(t, dialTCP(t, l.addr("http")), "GET /jwt HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer "+tok+
		"\r\nX-Hop: 1\r\nConnection: X-Rampart-Tenant, X-Rampart-Scopes, x-api-version, X-Hop\r\n\r\n")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	in := up.Last().Header
	if in.Get("X-Rampart-Tenant") != "acme" || in.Get("X-Rampart-Scopes") != "users:read" || in.Get("X-Api-Version") != "2" {
		t.Errorf("added headers missing upstream: %v", in)
	}
	if _, ok := in["X-Hop"]; ok {
		t.Errorf("X-Hop was named in Connection but reached the upstream: %v", in)
	}
	// Connection-named fields are gone before authentication reads them.
	code = rawH1(t, dialTCP(t, l.addr("http")), "GET /jwt HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer "+tok+
		"\r\nConnection: Authorization\r\n\r\n")
	if code != 401 {
		t.Errorf("Authorization named in Connection: status %d, want 401", code)
	}
}

// The same on a WebSocket upgrade, whose Connection names Upgrade too.
func TestConnectionCannotStripAddedHeadersWebSocket(t *testing.T) {
	l := newLab(t)
	up := wsEcho(t)
	is := newIssuer(t)
	c := l.config(up.Addr())
	c.AuthPolicies = []snapshot.AuthPolicy{{ID: "jwt", Type: "jwt", JWT: &snapshot.JWTPolicy{Issuer: "https://id.test/",
		Audiences: []string{"api"}, Algorithms: []string{"EdDSA"}, JWKSFile: is.file}}}
	r := getRoute("ws", "/chat", "app")
	r.AuthPolicyID = "jwt"
	c.Routes = []snapshot.Route{r}
	l.apply(c)
	tok := is.token(map[string]any{"tenant": "acme"})
	code := rawH1(t, dialTCP(t, l.addr("http")), "GET /chat HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer "+tok+
		"\r\nConnection: Upgrade, X-Rampart-Tenant\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", code)
	}
	if got := up.Last().Header.Get("X-Rampart-Tenant"); got != "acme" {
		t.Errorf("upstream X-Rampart-Tenant %q, want acme", got)
	}
}

// And on the h2c (gRPC) path to an HTTP/2 upstream.
func TestConnectionCannotStripAddedHeadersH2C(t *testing.T) {
	l := newLab(t)
	var mu sync.Mutex
	var last http.Header
	up := httptest.NewServer(h2c.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = r.Header.Clone()
		mu.Unlock()
	}), &http2.Server{}))
	t.Cleanup(up.Close)
	c := l.config(strings.TrimPrefix(up.URL, "http://"))
	c.Clusters[0].Protocol = "h2c"
	r := getRoute("r", "/x", "app")
	r.Headers = &snapshot.HeaderRules{Request: snapshot.HeaderOps{Set: map[string]string{"X-Api-Version": "2"}}}
	c.Routes = []snapshot.Route{r}
	l.apply(c)
	code := rawH1(t, dialTCP(t, l.addr("http")), "GET /x HTTP/1.1\r\nHost: api.example\r\nX-Hop: 1\r\n"+
		"Connection: X-Api-Version, X-Hop, X-Forwarded-Host\r\n\r\n")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if last.Get("X-Api-Version") != "2" || last.Get("X-Forwarded-Host") != "api.example" || last.Get("X-Hop") != "" {
		t.Errorf("h2c upstream headers: %v", last)
	}
}

// hostLab has one route for any host and any method on /v1/{rest...}.
func hostLab(t *testing.T, h3 bool) (*lab, *testUpstream) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	if h3 {
		c = l.h3Config(up.Addr())
	}
	c.Routes = []snapshot.Route{{ID: "v1", Host: "*", PathTemplate: "/v1/{rest...}", UpstreamCluster: "app", TimeoutMs: 2000,
		RequestClass: "write", Idempotency: "none"}}
	l.apply(c)
	return l, up
}

func (l *lab) badRequests(reason string) float64 {
	return testutil.ToFloat64(l.p.metrics.badRequests.WithLabelValues("400", reason))
}

// checkForwardedHost asserts the upstream got the normal host as Host and
// X-Forwarded-Host.
func checkForwardedHost(t *testing.T, up *testUpstream, want string) {
	t.Helper()
	r := up.Last()
	if r == nil || r.Host != want || r.Header.Get("X-Forwarded-Host") != want {
		t.Fatalf("upstream Host %q, X-Forwarded-Host %q; want %q", r.Host, r.Header.Get("X-Forwarded-Host"), want)
	}
}

func TestHostValidatedH1(t *testing.T) {
	l, up := hostLab(t, false)
	addr := l.addr("http")
	for _, h := range []string{"api.example.com:@evil.example", "api.example.com:8x", "a,b.example", "user@api.example", "::1"} {
		if code := rawH1(t, dialTCP(t, addr), "GET /v1/x HTTP/1.1\r\nHost: "+h+"\r\n\r\n"); code != 400 {
			t.Errorf("Host %q: status %d, want 400", h, code)
		}
	}
	if up.Count() != 0 || l.badRequests("host") != 5 {
		t.Fatalf("upstream saw %d requests; bad_requests{host} = %v", up.Count(), l.badRequests("host"))
	}
	for h, want := range map[string]string{
		"API.Example.COM.:": "api.example.com", "api.example.com:80": "api.example.com",
		"api.example.com:08080": "api.example.com:8080", "[::1]:8443": "[::1]:8443",
	} {
		if code := rawH1(t, dialTCP(t, addr), "GET /v1/x HTTP/1.1\r\nHost: "+h+"\r\n\r\n"); code != 200 {
			t.Fatalf("Host %q: status %d", h, code)
		}
		checkForwardedHost(t, up, want)
	}
	// An absolute-form target's authority is checked the same way.
	if code := rawH1(t, dialTCP(t, addr), "GET http://a.example:1x/v1/x HTTP/1.1\r\nHost: a.example\r\n\r\n"); code != 400 {
		t.Errorf("absolute form with a bad port: status %d", code)
	}
}

func TestHostValidatedH2(t *testing.T) {
	l, up := hostLab(t, false)
	req := func(authority string) int {
		code, err := rawH2(l.dialTLS("h2"), []field{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", "/v1/x"}})
		if err != nil {
			t.Fatalf(":authority %q: %v", authority, err)
		}
		return code
	}
	for _, a := range []string{"api.example.com:8x", "a,b.example", "a;b", "[::1]x"} {
		if code := req(a); code != 400 {
			t.Errorf(":authority %q: status %d, want 400", a, code)
		}
	}
	if up.Count() != 0 || l.badRequests("host") != 4 {
		t.Fatalf("upstream saw %d requests; bad_requests{host} = %v", up.Count(), l.badRequests("host"))
	}
	for a, want := range map[string]string{"API.example.com:443": "api.example.com", "[::1]:443": "[::1]", "a.example:": "a.example"} {
		if code := req(a); code != 200 {
			t.Fatalf(":authority %q: status %d", a, code)
		}
		checkForwardedHost(t, up, want)
	}
}

func TestHostValidatedH3(t *testing.T) {
	l, up := hostLab(t, true)
	c := &h3Raw{addr: l.addr("https"), tls: &tls.Config{RootCAs: l.roots, ServerName: "localhost", NextProtos: []string{"h3"}}}
	req := func(authority string) int {
		code, err := c.do([]field{{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", "/v1/x"}})
		if err != nil {
			t.Fatalf(":authority %q: %v", authority, err)
		}
		return code
	}
	for _, a := range []string{"api.example.com:8x", "a,b.example", "ex ample", "[::1]x"} {
		if code := req(a); code != 400 {
			t.Errorf(":authority %q: status %d, want 400", a, code)
		}
	}
	if up.Count() != 0 || l.badRequests("host") != 4 {
		t.Fatalf("upstream saw %d requests; bad_requests{host} = %v", up.Count(), l.badRequests("host"))
	}
	for a, want := range map[string]string{"API.example.com:443": "api.example.com", "[::1]:8443": "[::1]:8443"} {
		if code := req(a); code != 200 {
			t.Fatalf(":authority %q: status %d", a, code)
		}
		checkForwardedHost(t, up, want)
	}
}

// A query with bytes outside RFC 3986's query set, a malformed escape, a
// method that is not a token, or (HTTP/2, HTTP/3) a field value with
// white space at an end never reaches the upstream: each could change the
// request line or head an HTTP/1.1 upstream reads.
func TestRequestLineInjectionH1(t *testing.T) {
	l, up := hostLab(t, false)
	for _, target := range []string{"/v1/ok?a|b", "/v1/ok?a%zz", "/v1/ok?a{b}", `/v1/ok?a"b`} {
		if code := rawH1(t, dialTCP(t, l.addr("http")), "GET "+target+" HTTP/1.1\r\nHost: a.example\r\n\r\n"); code != 400 {
			t.Errorf("%s: status %d, want 400", target, code)
		}
	}
	if up.Count() != 0 || l.badRequests("query") != 4 {
		t.Fatalf("upstream saw %d requests; bad_requests{query} = %v", up.Count(), l.badRequests("query"))
	}
	if code := rawH1(t, dialTCP(t, l.addr("http")), "GET /v1/ok?a=%20&b=/c?d:@!$'()*+,;= HTTP/1.1\r\nHost: a.example\r\n\r\n"); code != 200 {
		t.Fatalf("valid query: status %d", code)
	}
	if q := up.Last().URL.RawQuery; q != "a=%20&b=/c?d:@!$'()*+,;=" {
		t.Errorf("upstream query %q", q)
	}
}

func injectionCases() []struct {
	reason string
	fields []field
} {
	base := func(method, path string, extra ...field) []field {
		return append([]field{{":method", method}, {":scheme", "https"}, {":authority", "a.example"}, {":path", path}}, extra...)
	}
	return []struct {
		reason string
		fields []field
	}{
		{"query", base("GET", "/v1/ok?a HTTP/1.0")},
		{"query", base("GET", "/v1/ok?a%4")},
		{"query", base("GET", "/v1/ok?\xc3\xa4")},
		{"method", base("GET /v1/x", "/v1/ok")},
		{"header", base("GET", "/v1/ok", field{"x-a", " padded"})},
		{"header", base("GET", "/v1/ok", field{"x-a", "padded\t"})},
	}
}

func TestRequestLineInjectionH2(t *testing.T) {
	l, up := hostLab(t, false)
	for _, tc := range injectionCases() {
		code, err := rawH2(l.dialTLS("h2"), tc.fields)
		if err != nil || code != 400 {
			t.Errorf("%v: status %d, %v; want 400", tc.fields, code, err)
		}
	}
	if up.Count() != 0 || l.badRequests("query") != 3 || l.badRequests("method") != 1 || l.badRequests("header") != 2 {
		t.Fatalf("upstream saw %d requests; bad_requests query %v method %v header %v", up.Count(),
			l.badRequests("query"), l.badRequests("method"), l.badRequests("header"))
	}
}

func TestRequestLineInjectionH3(t *testing.T) {
	l, up := hostLab(t, true)
	c := &h3Raw{addr: l.addr("https"), tls: &tls.Config{RootCAs: l.roots, ServerName: "localhost", NextProtos: []string{"h3"}}}
	for _, tc := range injectionCases() {
		code, err := c.do(tc.fields)
		if err != nil {
			t.Fatalf("%v: %v", tc.fields, err)
		}
		if code == 0 && tc.reason != "method" {
			t.Errorf("%v: stream reset, want 400", tc.fields)
		}
		if code != 0 && code != 400 {
			t.Errorf("%v: status %d, want 400", tc.fields, code)
		}
	}
	// quic-go may refuse a method that is not a token itself (stream reset).
	if up.Count() != 0 || l.badRequests("query") != 3 || l.badRequests("header") != 2 {
		t.Fatalf("upstream saw %d requests; bad_requests query %v header %v", up.Count(), l.badRequests("query"), l.badRequests("header"))
	}
}

// An upstream answering "Transfer-Encoding: Chunked" is read as chunked
// (RFC 9112 §7: the coding name is case-insensitive), not refused as 502.
func TestUpstreamChunkedAnyCase(t *testing.T) {
	addr := rawUpstream(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n", true)
	l := newLab(t)
	c := l.config(addr)
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	code, body, _ := get(t, http.DefaultClient, l.url("http", "/x"))
	if code != 200 || body != "hello" {
		t.Fatalf("got %d %q, want 200 \"hello\"", code, body)
	}
}

// Requests the HTTP/1.1 parser refuses are counted by status and a reason
// from a fixed set (the parser's message quotes bytes, so it is no label).
func TestParserRefusalsCountedWithReason(t *testing.T) {
	l, up := hostLab(t, false)
	for _, tc := range []struct{ head, code, reason string }{
		{"GET /v1/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400", "host"},
		{"GET /v1/x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n continued\r\n\r\n", "400", "header"},
		{"GET /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "400", "framing"},
		{"GET /v1/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", "501", "transfer_encoding"},
		{"GET /v1/\x01 HTTP/1.1\r\nHost: a\r\n\r\n", "400", "target"},
		{"GET /v1/x HTTP/2.2\r\nHost: a\r\n\r\n", "505", "version"},
	} {
		rawH1(t, dialTCP(t, l.addr("http")), tc.head)
		if n := testutil.ToFloat64(l.p.metrics.badRequests.WithLabelValues(tc.code, tc.reason)); n != 1 {
			t.Errorf("%q: rampart_bad_requests_total{code=%s,reason=%s} = %v, want 1", tc.head, tc.code, tc.reason, n)
		}
	}
	if up.Count() != 0 {
		t.Errorf("refused requests reached the upstream: %d", up.Count())
	}
}
