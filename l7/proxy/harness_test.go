package proxy

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"

	"github.com/rampart-edge/rampart/l7/certgen"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// lab is one proxy under test with its key, certificate and clients.
type lab struct {
	t        testing.TB
	p        *Proxy
	priv     ed25519.PrivateKey
	pub      ed25519.PublicKey
	certFile string
	keyFile  string
	roots    *x509.CertPool
	seq      uint64
}

func newLab(t testing.TB) *lab {
	t.Helper()
	return newLabWith(t, Options{})
}

// newLabWith is newLab with the proxy's options (a discarding logger when
// o has none).
func newLabWith(t testing.TB, o Options) *lab {
	t.Helper()
	dir := t.TempDir()
	privPEM, pubPEM, err := snapshot.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	certFile, keyFile, err := certgen.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, _ := os.ReadFile(certFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pemBytes)
	l := &lab{t: t, priv: priv, pub: pub, certFile: certFile, keyFile: keyFile, roots: roots}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	l.p = New(o)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.p.Shutdown(ctx)
	})
	return l
}

// setRegion places the proxy in a region (before its first snapshot).
func (l *lab) setRegion(r string) {
	l.p.region = r
	l.p.clusters = cluster.NewSet(l.p.metrics.cluster, l.p.errLog, r)
}

// config returns a config with an https and an http listener on free ports
// and one cluster "app" with the given endpoints.
func (l *lab) config(endpoints ...string) *snapshot.Config {
	c := &snapshot.Config{
		Version: snapshot.Version{Epoch: 1},
		Listeners: []snapshot.Listener{
			{Name: "https", Address: "127.0.0.1:0", TLS: &snapshot.TLS{
				Certificates: []snapshot.Certificate{{CertFile: l.certFile, KeyFile: l.keyFile}}}},
			{Name: "http", Address: "127.0.0.1:0"},
		},
	}
	if len(endpoints) > 0 {
		c.Clusters = append(c.Clusters, clusterOf("app", endpoints...))
	}
	return c
}

func clusterOf(name string, addrs ...string) snapshot.Cluster {
	c := snapshot.Cluster{Name: name}
	for _, a := range addrs {
		c.Endpoints = append(c.Endpoints, snapshot.Endpoint{Address: a})
	}
	return c
}

func getRoute(id, path, clusterName string) snapshot.Route {
	return snapshot.Route{ID: id, Host: "*", Methods: []string{"GET", "HEAD"}, PathTemplate: path,
		UpstreamCluster: clusterName, TimeoutMs: 30000} // a liveness bound: tests that need a route timeout set their own
}

// snap compiles and signs c (with the next sequence) and verifies it.
func (l *lab) snap(c *snapshot.Config) *snapshot.Snapshot {
	l.t.Helper()
	if c.Version.Sequence == 0 {
		l.seq++
		c.Version.Sequence = l.seq
	}
	file, err := snapshot.Build(c, l.priv, time.Now())
	if err != nil {
		l.t.Fatalf("build snapshot: %v", err)
	}
	s, err := snapshot.Parse(file, l.pub)
	if err != nil {
		l.t.Fatalf("parse snapshot: %v", err)
	}
	return s
}

func (l *lab) apply(c *snapshot.Config) {
	l.t.Helper()
	if err := l.p.Apply(l.snap(c)); err != nil {
		l.t.Fatalf("apply: %v", err)
	}
}

func (l *lab) addr(listener string) string {
	a, ok := l.p.ListenerAddr(listener)
	if !ok {
		l.t.Fatalf("no listener %q", listener)
	}
	return a.String()
}

// h1 and h2 return HTTPS clients that trust the lab certificate and speak
// only that protocol.
func (l *lab) h1() *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: l.roots, ServerName: "localhost"},
		MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	l.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (l *lab) h2() *http.Client {
	tr := &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: l.roots, ServerName: "localhost"}}
	l.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (l *lab) url(listener, path string) string {
	scheme := "http"
	if listener == "https" {
		scheme = "https"
	}
	return scheme + "://" + l.addr(listener) + path
}

// upstream is a test server that names itself in X-Upstream and counts
// requests.
type testUpstream struct {
	*httptest.Server
	name  string
	mu    sync.Mutex
	count int
	last  *http.Request
}

func (u *testUpstream) Addr() string { return strings.TrimPrefix(u.URL, "http://") }

func (u *testUpstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.count
}

func (u *testUpstream) Last() *http.Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

func startUpstream(t testing.TB, name string, h http.HandlerFunc) *testUpstream {
	t.Helper()
	return startUpstreamWith(t, name, h, nil)
}

// startUpstreamWith lets configure adjust the server before it starts.
func startUpstreamWith(t testing.TB, name string, h http.HandlerFunc, configure func(*http.Server)) *testUpstream {
	t.Helper()
	u := &testUpstream{name: name}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, name+" "+r.URL.Path) }
	}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.count++
		u.last = r.Clone(context.Background())
		u.mu.Unlock()
		w.Header().Set("X-Upstream", name)
		h(w, r)
	}))
	if configure != nil {
		configure(u.Config)
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// get performs a request and returns status, body and response.
func get(t *testing.T, c *http.Client, url string) (int, string, *http.Response) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(b), resp
}

// freePort returns an address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	_ = ln.Close()
	return a
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logSink is a log destination safe to read while the proxy writes to it.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// metricValue reads one series from a registry by name and label pairs
// (name, value, ...): a counter's or gauge's value, 0 when the series does
// not exist yet.
func metricValue(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
