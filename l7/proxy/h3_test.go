package proxy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/rampart-edge/rampart/l7/listener"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// h3Config is the lab config with HTTP/3 switched on for the https listener.
func (l *lab) h3Config(endpoints ...string) *snapshot.Config {
	c := l.config(endpoints...)
	c.Listeners[0].Protocols = []string{"h2", "http1", "h3"}
	return c
}

// h3Client returns an HTTP/3-only client that trusts the lab certificate,
// with liveness bounds a busy box cannot miss (10 s handshake, 30 s request).
func (l *lab) h3Client() *http.Client { return l.h3ClientWith(10*time.Second, 30*time.Second) }

// h3Refused returns the same client for requests that must fail: a
// handshake that gets no answer fails after 300 ms.
func (l *lab) h3Refused() *http.Client { return l.h3ClientWith(300*time.Millisecond, 5*time.Second) }

func (l *lab) h3ClientWith(handshake, timeout time.Duration) *http.Client {
	tr := &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: l.roots, ServerName: "localhost"},
		QUICConfig:      &quic.Config{HandshakeIdleTimeout: handshake},
	}
	l.t.Cleanup(func() { _ = tr.Close() })
	return &http.Client{Transport: tr, Timeout: timeout}
}

func h3Get(t *testing.T, c *http.Client, url string) (int, string, *http.Response) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("HTTP/3 GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("HTTP/3 GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(b), resp
}

func TestH3RoundTrip(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.h3Config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("users", "/v1/users/{id}", "app")}
	l.apply(c)

	code, body, resp := h3Get(t, l.h3Client(), l.url("https", "/v1/users/42?x=1"))
	if code != 200 || body != "app /v1/users/42" {
		t.Fatalf("got %d %q", code, body)
	}
	if resp.Proto != "HTTP/3.0" {
		t.Errorf("proto %s", resp.Proto)
	}
	id := resp.Header.Get("X-Request-Id")
	if id == "" || resp.Header.Get("X-Upstream") != "app" {
		t.Errorf("response headers %v", resp.Header)
	}
	if resp.Header.Get("Alt-Svc") != "" {
		t.Errorf("HTTP/3 response announces Alt-Svc %q", resp.Header.Get("Alt-Svc"))
	}
	r := up.Last()
	if r.URL.RawQuery != "x=1" || r.Header.Get("X-Forwarded-Proto") != "https" ||
		r.Header.Get("X-Forwarded-For") != "127.0.0.1" || r.Header.Get("X-Request-Id") != id {
		t.Errorf("upstream saw query %q headers %v", r.URL.RawQuery, r.Header)
	}
	// A GET has no body upstream, as over HTTP/1.1 and HTTP/2.
	if r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
		t.Errorf("upstream saw a body: Content-Length %d, Transfer-Encoding %v", r.ContentLength, r.TransferEncoding)
	}
	m := l.p.metrics
	if n := testutil.ToFloat64(m.requests.WithLabelValues("users", "app", "200")); n != 1 {
		t.Errorf("rampart_requests_total{users,app,200} = %v", n)
	}
	if n := testutil.ToFloat64(m.listener.ConnAccepted.WithLabelValues("https", "h3")); n != 1 {
		t.Errorf("rampart_connections_accepted_total{https,h3} = %v", n)
	}
	// The receive buffer gauge is exported for the h3 listener only.
	if n, err := testutil.GatherAndCount(m.Registry, "rampart_h3_udp_receive_buffer_bytes"); err != nil || n != 1 {
		t.Errorf("rampart_h3_udp_receive_buffer_bytes series: %d, %v", n, err)
	}
	if v := l.p.listeners["https"].H3ReceiveBuffer(); v <= 0 {
		t.Errorf("receive buffer %d", v)
	} else {
		t.Logf("UDP receive buffer (SO_RCVBUF as reported): %d bytes", v)
	}
}

func TestH3UDPBufferReadBackAndWarning(t *testing.T) {
	l := newLab(t)
	logs := &logSink{}
	l.p.errLog = slog.New(slog.NewTextHandler(logs, nil))
	l.apply(l.h3Config())
	got := l.p.listeners["https"].H3ReceiveBuffer()
	granted := got
	if runtime.GOOS == "linux" {
		granted /= 2
	}
	g, err := testutil.GatherAndCount(l.p.metrics.Registry, "rampart_h3_udp_receive_buffer_bytes")
	if err != nil || g != 1 {
		t.Fatalf("gauge series %d, %v", g, err)
	}
	mfs, _ := l.p.metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "rampart_h3_udp_receive_buffer_bytes" {
			if v := mf.GetMetric()[0].GetGauge().GetValue(); int(v) != got {
				t.Errorf("gauge %v, socket %d", v, got)
			}
		}
	}
	warned := strings.Contains(logs.String(), "net.core.rmem_max")
	t.Logf("SO_RCVBUF %d (granted %d of %d asked), warned: %v", got, granted, listener.H3SocketBuffer, warned)
	if warned != (granted < listener.H3SocketBuffer) {
		t.Errorf("warning %v for %d granted of %d asked; logs:\n%s", warned, granted, listener.H3SocketBuffer, logs.String())
	}
}

func TestH3AltSvcOnTCPResponses(t *testing.T) {
	up := startUpstream(t, "app", nil)
	for _, h3 := range []bool{true, false} {
		t.Run(fmt.Sprint("h3=", h3), func(t *testing.T) {
			l := newLab(t)
			c := l.config(up.Addr())
			if h3 {
				c = l.h3Config(up.Addr())
			}
			c.Routes = []snapshot.Route{getRoute("any", "/x", "app")}
			l.apply(c)
			_, port, _ := net.SplitHostPort(l.addr("https"))
			want := ""
			if h3 {
				want = `h3=":` + port + `"; ma=86400`
			}
			for _, tc := range []struct {
				name   string
				client *http.Client
			}{{"h1", l.h1()}, {"h2", l.h2()}} {
				for _, path := range []string{"/x", "/not-routed"} {
					_, _, resp := get(t, tc.client, l.url("https", path))
					if got := strings.Join(resp.Header.Values("Alt-Svc"), ","); got != want {
						t.Errorf("%s %s: Alt-Svc %q, want %q", tc.name, path, got, want)
					}
				}
			}
			// The plain-HTTP listener never announces HTTP/3.
			if _, _, resp := get(t, http.DefaultClient, l.url("http", "/x")); resp.Header.Get("Alt-Svc") != "" {
				t.Errorf("plain listener: Alt-Svc %q", resp.Header.Get("Alt-Svc"))
			}
		})
	}
}

func TestH3PostBodyReachesUpstream(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	c := l.h3Config(up.Addr())
	c.Routes = []snapshot.Route{{ID: "upload", Host: "*", Methods: []string{"POST", "DELETE"}, PathTemplate: "/upload",
		UpstreamCluster: "app", TimeoutMs: 5000, Idempotency: "none"}}
	l.apply(c)
	client := l.h3Client()

	// 3 MiB: many times the per-stream and per-connection windows, so the
	// body must stream through the proxy.
	body := make([]byte, 3<<20)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	for _, tc := range []struct {
		name   string
		method string
		length int64 // -1: sent without Content-Length
	}{
		{"content-length", "POST", int64(len(body))},
		{"unknown-length", "POST", -1},
		{"delete-with-body", "DELETE", -1}, // a method that usually has none
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, l.url("https", "/upload"), io.NopCloser(strings.NewReader(string(body))))
			req.ContentLength = tc.length
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := strconv.Itoa(len(body)) + " " + hex.EncodeToString(sum[:])
			if resp.StatusCode != 200 || string(got) != want {
				t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, got, want)
			}
			if cl := up.Last().ContentLength; tc.length >= 0 && cl != tc.length {
				t.Errorf("upstream saw Content-Length %d", cl)
			}
		})
	}
	if n := testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("upload", "app", "200")); n != 3 {
		t.Errorf("rampart_requests_total{upload,app,200} = %v", n)
	}
}

func TestH3LimitsFromListenerConfig(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.h3Config(up.Addr())
	c.Listeners[0].MaxHeaderBytes = 4096
	c.Listeners[0].MaxConnections = 1
	c.Routes = []snapshot.Route{getRoute("any", "/x", "app")}
	l.apply(c)

	// max_header_bytes: a head over it is a 431 and never reaches the upstream.
	first := l.h3Client()
	req, _ := http.NewRequest("GET", l.url("https", "/x"), nil)
	req.Header.Set("X-Big", strings.Repeat("b", 8000))
	resp, err := first.Do(req)
	if err != nil {
		t.Fatalf("oversized head: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized head: %d, want 431", resp.StatusCode)
	}
	if code, _, _ := h3Get(t, first, l.url("https", "/x")); code != 200 {
		t.Fatalf("small head: %d", code)
	}
	if up.Count() != 1 {
		t.Errorf("upstream got %d requests, want 1", up.Count())
	}

	// max_connections: a second QUIC connection is refused while the
	// first is open, and admitted once it has closed.
	if _, err := l.h3Refused().Get(l.url("https", "/x")); err == nil {
		t.Error("second connection admitted over max_connections 1")
	}
	if n := testutil.ToFloat64(l.p.metrics.listener.ConnRejected.WithLabelValues("https", "max_connections")); n < 1 {
		t.Errorf("rejected max_connections = %v", n)
	}
	_ = first.Transport.(*http3.Transport).Close()
	eventually(t, 30*time.Second, "the first connection to be released", func() bool {
		return l.p.listeners["https"].H3Conns() == 0
	})
	if code, _, _ := h3Get(t, l.h3Client(), l.url("https", "/x")); code != 200 {
		t.Errorf("after the first connection closed: %d", code)
	}
}

// udpFree reports whether addr can be bound for UDP (and releases it).
func udpFree(addr string) bool {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	_ = pc.Close()
	return true
}

func TestH3FollowsSnapshotSwaps(t *testing.T) {
	l := newLab(t)
	started, gate := make(chan struct{}, 1), make(chan struct{})
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-gate
		}
		_, _ = io.WriteString(w, "app "+r.URL.Path)
	})
	withH3 := func() *snapshot.Config {
		c := l.h3Config(up.Addr())
		c.Routes = []snapshot.Route{getRoute("any", "/x", "app"), getRoute("slow", "/slow", "app")}
		return c
	}
	withoutH3 := func() *snapshot.Config {
		c := withH3()
		c.Listeners[0].Protocols = []string{"h2", "http1"}
		return c
	}
	l.apply(withH3())
	addr := l.addr("https")
	if code, _, _ := h3Get(t, l.h3Client(), l.url("https", "/x")); code != 200 {
		t.Fatalf("h3 on: %d", code)
	}

	// A settings change keeps HTTP/3 up (a new generation on the same socket).
	c := withH3()
	c.Listeners[0].H2MaxConcurrentStreams = 10
	l.apply(c)
	if code, _, _ := h3Get(t, l.h3Client(), l.url("https", "/x")); code != 200 {
		t.Fatalf("after a settings change: %d", code)
	}

	// h3 removed: new HTTP/3 requests fail, Alt-Svc is gone, the socket is
	// released once the old connections have drained.
	l.apply(withoutH3())
	if addr != l.addr("https") {
		t.Fatalf("listener moved from %s to %s", addr, l.addr("https"))
	}
	if resp, err := l.h3Refused().Get(l.url("https", "/x")); err == nil {
		resp.Body.Close()
		t.Fatalf("HTTP/3 request served after h3 was removed: %d", resp.StatusCode)
	}
	if _, _, resp := get(t, l.h1(), l.url("https", "/x")); resp.Header.Get("Alt-Svc") != "" {
		t.Errorf("Alt-Svc %q after h3 was removed", resp.Header.Get("Alt-Svc"))
	}
	eventually(t, 30*time.Second, "the UDP port to be released", func() bool { return udpFree(addr) })
	if n, _ := testutil.GatherAndCount(l.p.metrics.Registry, "rampart_h3_udp_receive_buffer_bytes"); n != 0 {
		t.Errorf("%d receive buffer series after h3 was removed", n)
	}

	// h3 back: served again on the same port.
	l.apply(withH3())
	if code, _, _ := h3Get(t, l.h3Client(), l.url("https", "/x")); code != 200 {
		t.Fatalf("h3 back on: %d", code)
	}

	// Off and on again while a request is in flight: the request finishes
	// on the draining server, and the server listens again on the socket
	// it still holds.
	h3 := l.p.listeners["https"].H3Socket()
	slow := make(chan string, 1)
	go func() {
		resp, err := l.h3Client().Get(l.url("https", "/slow"))
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- fmt.Sprint(resp.StatusCode, " ", string(b))
	}()
	<-started
	l.apply(withoutH3())
	l.apply(withH3())
	if l.p.listeners["https"].H3Socket() != h3 {
		t.Error("h3 on again while draining bound a new socket")
	}
	if code, _, _ := h3Get(t, l.h3Client(), l.url("https", "/x")); code != 200 {
		t.Fatalf("h3 on again right after off: %d", code)
	}
	close(gate)
	if got := <-slow; got != "200 app /slow" {
		t.Errorf("in-flight request across the swap: %s", got)
	}
}

func TestH3ShutdownFreesUDPPort(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.h3Config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("any", "/x", "app")}
	l.apply(c)
	addr := l.addr("https")
	if udpFree(addr) {
		t.Fatalf("UDP %s is free while HTTP/3 serves", addr)
	}
	if code, _, _ := h3Get(t, l.h3Client(), l.url("https", "/x")); code != 200 {
		t.Fatal(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a liveness bound
	defer cancel()
	if err := l.p.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if !udpFree(addr) {
		t.Fatalf("UDP %s still bound after Shutdown", addr)
	}
}
