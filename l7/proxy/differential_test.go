package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"

	"github.com/rampart-edge/rampart/l7/certgen"
	"github.com/rampart-edge/rampart/l7/h1"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/stage"
)

// The differential check: every request a frontend (rampart's HTTP/1.1
// parser, x/net's HTTP/2 server, quic-go's HTTP/3 server) hands to the
// proxy and the proxy's request check accepts is serialised exactly as it
// goes upstream (forwarding.writeHead) and parsed back with l7/h1's strict
// parser; method, target, Host and every header field must come back
// identical. A request the check refuses is answered 400 and never
// serialised.

// verdict is what the proxy made of one request a frontend accepted.
type verdict struct {
	refused  string // checkRequest's reason; "" when accepted
	mismatch string // how the parsed-back head differs; "" when identical
}

// diffRig runs the three frontends with a handler that does the round trip.
type diffRig struct {
	t  testing.TB
	h3 *h3Raw
	mu sync.Mutex
	vs []verdict // of the requests handed on since the last take
}

func newDiffRig(t testing.TB) *diffRig {
	d := &diffRig{t: t}
	dir := t.TempDir()
	certFile, keyFile, err := certgen.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, _ := os.ReadFile(certFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	ln, err := quic.ListenAddr("127.0.0.1:0", http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{Handler: d}
	go func() { _ = srv.ServeListener(ln) }()
	t.Cleanup(func() { _ = srv.Close(); _ = ln.Close() })
	d.h3 = &h3Raw{addr: ln.Addr().String(), tls: &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h3"}}}
	t.Cleanup(func() {
		if d.h3.conn != nil {
			_ = d.h3.conn.CloseWithError(0, "")
		}
	})
	return d
}

func (d *diffRig) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := roundTrip(r)
	d.mu.Lock()
	d.vs = append(d.vs, v)
	d.mu.Unlock()
}

// take returns the verdicts of the requests the frontend handed on since
// the last call: none, one, or (HTTP/1.1 bytes holding two requests) more.
func (d *diffRig) take() []verdict {
	d.mu.Lock()
	defer d.mu.Unlock()
	vs := d.vs
	d.vs = nil
	return vs
}

// viaH1 sends raw bytes to rampart's HTTP/1.1 server over a pipe.
func (d *diffRig) viaH1(raw string) []verdict {
	c1, c2 := net.Pipe()
	srv := &h1.Server{Handler: d, MaxHeaderBytes: 64 << 10, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { srv.ServeConn(c2); close(done) }()
	go func() { _, _ = io.Copy(io.Discard, c1) }()
	_ = c1.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c1, raw) // returns once the server has read it all
	_ = c1.Close()
	<-done
	return d.take()
}

// viaH2 sends header fields to x/net's HTTP/2 server over a pipe.
func (d *diffRig) viaH2(fields []field) []verdict {
	c1, c2 := net.Pipe()
	done := make(chan struct{})
	go func() {
		(&http2.Server{}).ServeConn(c2, &http2.ServeConnOpts{Handler: d})
		close(done)
	}()
	_, _ = rawH2(c1, fields) // closes c1
	<-done
	return d.take()
}

// viaH3 sends header fields to quic-go's HTTP/3 server on loopback.
func (d *diffRig) viaH3(fields []field) []verdict {
	if _, err := d.h3.do(fields); err != nil {
		if _, err := d.h3.do(fields); err != nil { // one retry on a fresh connection
			d.t.Fatalf("HTTP/3 request %v: %v", fields, err)
		}
	}
	return d.take()
}

// roundTrip does what the proxy does with r up to the upstream request
// head, then parses that head back.
func roundTrip(r *http.Request) verdict {
	dropConnectionListed(r.Header)
	ct, reason, _ := checkRequest(r, route.RejectEncodedSlashes)
	if reason != "" {
		return verdict{refused: reason}
	}
	f := forwarding{r: r, path: ct.path, query: ct.query, reqID: "rid-1", deadline: time.Now().Add(time.Minute),
		upgrade: upgradeProtocol(r)}
	var head bytes.Buffer
	bw := bufio.NewWriter(&head)
	f.writeHead(bw, "192.0.2.10:8080")
	_ = bw.Flush()
	got, err := parseHead(head.Bytes())
	if err != nil {
		return verdict{mismatch: fmt.Sprintf("strict parser refused %q: %v", head.String(), err)}
	}
	return verdict{mismatch: compareHead(r, &f, got, head.String())}
}

// parsedHead is what l7/h1 read from a serialised head.
type parsedHead struct {
	method, target, host string
	header               http.Header
}

// parseHead parses an upstream request head with l7/h1's server.
func parseHead(head []byte) (parsedHead, error) {
	var got parsedHead
	seen := false
	srv := &h1.Server{MaxHeaderBytes: 1 << 20, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = parsedHead{method: r.Method, target: r.RequestURI, host: r.Host, header: r.Header.Clone()}
			seen = true
		})}
	c1, c2 := net.Pipe()
	done := make(chan struct{})
	go func() { srv.ServeConn(c2); close(done) }()
	_ = c1.SetDeadline(time.Now().Add(10 * time.Second))
	var resp bytes.Buffer
	go func() { _, _ = c1.Write(head) }()
	br := bufio.NewReader(c1)
	res, err := http.ReadResponse(br, nil)
	if err == nil {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		resp.WriteString(res.Status + ": " + string(b))
	}
	_ = c1.Close()
	<-done
	if !seen {
		return got, fmt.Errorf("answered %q", resp.String())
	}
	return got, nil
}

// compareHead checks the parsed head against the request it was written
// from: same method, the normalised target, the normalised authority as
// Host and X-Forwarded-Host, every forwarded field with the same values in
// the same order, and only the fields the proxy adds besides.
func compareHead(r *http.Request, f *forwarding, got parsedHead, head string) string {
	target := f.path
	if f.query != "" {
		target += "?" + f.query
	}
	var diffs []string
	if got.method != r.Method {
		diffs = append(diffs, fmt.Sprintf("method %q, sent %q", got.method, r.Method))
	}
	if got.target != target {
		diffs = append(diffs, fmt.Sprintf("target %q, sent %q", got.target, target))
	}
	if got.host != r.Host {
		diffs = append(diffs, fmt.Sprintf("Host %q, sent %q", got.host, r.Host))
	}
	if h, a, err := route.ParseAuthority(got.host, -1); err != nil || a != got.host || h != route.NormalizeHost(r.Host) {
		diffs = append(diffs, fmt.Sprintf("Host %q does not route as %q (%v)", got.host, route.NormalizeHost(r.Host), err))
	}
	want := http.Header{}
	for k, vv := range r.Header {
		switch {
		case dropRequestHeader(k):
		case k == "Cookie" && len(vv) > 1:
			want[k] = []string{strings.Join(vv, "; ")}
		default:
			want[k] = vv
		}
	}
	want["X-Forwarded-For"] = []string{strings.Join(append(append([]string(nil), r.Header["X-Forwarded-For"]...), stage.ClientIP(r.RemoteAddr)), ", ")}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	want["X-Forwarded-Proto"] = []string{proto}
	want["X-Forwarded-Host"] = []string{r.Host}
	want["X-Request-Id"] = []string{f.reqID}
	if f.upgrade != "" {
		want["Connection"], want["Upgrade"] = []string{"Upgrade"}, []string{f.upgrade}
	}
	gotHdr := got.header
	delete(gotHdr, "Host")
	if ms := gotHdr["X-Rampart-Timeout-Ms"]; len(ms) == 1 && strings.Trim(ms[0], "0123456789") == "" && ms[0] != "" {
		want["X-Rampart-Timeout-Ms"] = ms
	}
	if !reflect.DeepEqual(gotHdr, want) {
		diffs = append(diffs, fmt.Sprintf("header fields\n got %q\nwant %q", gotHdr, want))
	}
	if diffs == nil {
		return ""
	}
	return strings.Join(diffs, "; ") + "\nhead written: " + fmt.Sprintf("%q", head)
}

// diffCase is one request in each frontend's terms; accept says which
// frontends must hand it on and have it accepted by the proxy's check.
type diffCase struct {
	name   string
	h1     string  // raw HTTP/1.1 bytes ("" skips)
	fields []field // HTTP/2 and HTTP/3 header fields (nil skips)
	accept bool
}

func reqFields(method, authority, path string, extra ...field) []field {
	return append([]field{{":method", method}, {":scheme", "https"}, {":authority", authority}, {":path", path}}, extra...)
}

func diffCases() []diffCase {
	return []diffCase{
		{"plain", "GET /a?b=c HTTP/1.1\r\nHost: a.example\r\n\r\n", reqFields("GET", "a.example", "/a?b=c"), true},
		{"host normalised", "GET /a HTTP/1.1\r\nHost: A.Example.:\r\n\r\n", reqFields("GET", "A.Example.:", "/a"), true},
		{"host port kept", "GET /a HTTP/1.1\r\nHost: a.example:08443\r\n\r\n", reqFields("GET", "a.example:08443", "/a"), true},
		{"ipv6", "GET /a HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n", reqFields("GET", "[::1]:8443", "/a"), true},
		{"absolute form", "GET http://B.example:81/x?y HTTP/1.1\r\nHost: a.example\r\n\r\n", nil, true},
		{"path normalised", "GET /a/./b/../%7e/%3a HTTP/1.1\r\nHost: a\r\n\r\n", reqFields("GET", "a", "/a/./b/../%7e/%3a"), true},
		{"query bytes", "GET /a?x=/p?q:@!$&'()*+,;=-._~%20%2F HTTP/1.1\r\nHost: a\r\n\r\n",
			reqFields("GET", "a", "/a?x=/p?q:@!$&'()*+,;=-._~%20%2F"), true},
		{"values", "GET /a HTTP/1.1\r\nHost: a\r\nX-A: in  ner, \"q\" \xff\xfe\r\nX-A: second\r\nX-Empty:\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n",
			reqFields("GET", "a", "/a", field{"x-a", "in  ner, \"q\" \xff\xfe"}, field{"x-a", "second"}, field{"x-empty", ""},
				field{"x-forwarded-for", "10.0.0.1"}), true},
		{"cookies", "GET /a HTTP/1.1\r\nHost: a\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
			reqFields("GET", "a", "/a", field{"cookie", "a=1"}, field{"cookie", "b=2"}), true},
		{"own method", "PURGE /a HTTP/1.1\r\nHost: a\r\n\r\n", reqFields("PURGE", "a", "/a"), true},
		{"connection-named", "GET /a HTTP/1.1\r\nHost: a\r\nX-Hop: 1\r\nX-Keep: 2\r\nConnection: X-Hop, keep-alive\r\n\r\n", nil, true},
		{"websocket", "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n", nil, true},
		{"te trailers", "", reqFields("POST", "a", "/rpc", field{"te", "trailers"}, field{"content-type", "application/grpc"}), true},
		{"spoofed forwarding fields", "GET /a HTTP/1.1\r\nHost: a\r\nX-Forwarded-Host: evil\r\nX-Request-Id: x\r\n\r\n",
			reqFields("GET", "a", "/a", field{"x-forwarded-host", "evil"}, field{"x-request-id", "x"}), true},

		{"query with a space", "", reqFields("GET", "a", "/ok?a HTTP/1.0"), false},
		{"query pipe", "GET /ok?a|b HTTP/1.1\r\nHost: a\r\n\r\n", reqFields("GET", "a", "/ok?a|b"), false},
		{"query bad escape", "GET /ok?a%zz HTTP/1.1\r\nHost: a\r\n\r\n", reqFields("GET", "a", "/ok?a%zz"), false},
		{"host userinfo trick", "GET /a HTTP/1.1\r\nHost: a.example:@evil\r\n\r\n", nil, false},
		{"host bad port", "GET /a HTTP/1.1\r\nHost: a.example:8x\r\n\r\n", reqFields("GET", "a.example:8x", "/a"), false},
		{"host list", "GET /a HTTP/1.1\r\nHost: a,b\r\n\r\n", reqFields("GET", "a,b", "/a"), false},
		{"method with a space", "", reqFields("GET /x", "a", "/a"), false},
		{"padded value", "", reqFields("GET", "a", "/a", field{"x-a", " v"}), false},
		{"path with a space", "", reqFields("GET", "a", "/a b"), false},
	}
}

func TestUpstreamHeadRoundTrip(t *testing.T) {
	d := newDiffRig(t)
	for _, tc := range diffCases() {
		t.Run(tc.name, func(t *testing.T) {
			check := func(front string, vs []verdict) {
				t.Helper()
				if len(vs) > 1 {
					t.Fatalf("%s: %d requests handed on, want at most 1", front, len(vs))
				}
				accepted, refused := false, ""
				for _, v := range vs {
					if v.mismatch != "" {
						t.Fatalf("%s: %s", front, v.mismatch)
					}
					accepted, refused = v.refused == "", v.refused
				}
				if accepted != tc.accept {
					t.Errorf("%s: handed on %d, refused %q; want accepted %v", front, len(vs), refused, tc.accept)
				}
			}
			if tc.h1 != "" {
				check("HTTP/1.1", d.viaH1(tc.h1))
			}
			if tc.fields != nil {
				check("HTTP/2", d.viaH2(tc.fields))
				check("HTTP/3", d.viaH3(tc.fields))
			}
		})
	}
}

// FuzzUpstreamHeadRoundTrip sends one request built from the fuzzed
// method, target, authority and header field through every frontend;
// whatever is accepted must round-trip.
func FuzzUpstreamHeadRoundTrip(f *testing.F) {
	f.Add("GET", "/a?b=c", "a.example", "X-A", "v")
	f.Add("GET", "/ok?a HTTP/1.0", "a.example:@evil", "Connection", "X-Rampart-Tenant")
	f.Add("POST", "/a/../b/%2e/c", "[::1]:0443", "Cookie", "a=1; b=2")
	f.Add("PURGE", "/x?%41", "A.B.:", "X-Forwarded-For", "1.2.3.4, 5.6.7.8")
	f.Add("GET", "http://h.example/x", "h.example", "Upgrade", "websocket")
	d := newDiffRig(f)
	f.Fuzz(func(t *testing.T, method, target, authority, name, value string) {
		if len(method)+len(target)+len(authority)+len(name)+len(value) > 8<<10 {
			return // size limits differ by configuration; they are not a misparse
		}
		d.t = t
		raw := method + " " + target + " HTTP/1.1\r\nHost: " + authority + "\r\n"
		fields := reqFields(method, authority, target)
		if name != "" {
			raw += name + ": " + value + "\r\n"
			fields = append(fields, field{strings.ToLower(name), value})
		}
		for front, vs := range map[string][]verdict{
			"HTTP/1.1": d.viaH1(raw + "\r\n"), "HTTP/2": d.viaH2(fields), "HTTP/3": d.viaH3(fields),
		} {
			for _, v := range vs {
				if v.mismatch != "" {
					t.Fatalf("%s: %s", front, v.mismatch)
				}
			}
		}
	})
}
