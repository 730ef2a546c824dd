package proxy

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/tickets"
)

// ticketPair is two proxies with an HTTP/1.1+h3 TLS listener each; with
// shared, their ticket keys come from one state file.
func ticketPair(t *testing.T, shared bool) [2]*lab {
	t.Helper()
	up := startUpstream(t, "app", nil)
	path := filepath.Join(t.TempDir(), "tls-tickets.json")
	var labs [2]*lab
	for i := range labs {
		var src *tickets.Source
		if shared {
			var err error
			if src, err = tickets.New(path); err != nil {
				t.Fatal(err)
			}
		}
		labs[i] = newLabWith(t, Options{Tickets: src})
		if i == 1 { // one certificate for both, as a node's proxies have
			labs[1].certFile, labs[1].keyFile, labs[1].roots = labs[0].certFile, labs[0].keyFile, labs[0].roots
		}
		c := labs[i].h3Config(up.Addr())
		c.TLSSessionTickets = &snapshot.TicketPolicy{RotationMs: 600_000}
		c.Routes = []snapshot.Route{getRoute("r", "/r", "app")}
		labs[i].apply(c)
	}
	return labs
}

// resumedH1 and resumedH3 do one request to each URL with one session
// cache and report whether each handshake resumed.
func resumedH1(t *testing.T, base *tls.Config, urls ...string) []bool {
	return resumed(t, base, urls, func(cfg *tls.Config) http.RoundTripper {
		return &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	})
}

func resumedH3(t *testing.T, base *tls.Config, urls ...string) []bool {
	return resumed(t, base, urls, func(cfg *tls.Config) http.RoundTripper {
		return &http3.Transport{TLSClientConfig: cfg, QUICConfig: &quic.Config{HandshakeIdleTimeout: 10 * time.Second}}
	})
}

func resumed(t *testing.T, base *tls.Config, urls []string, transport func(*tls.Config) http.RoundTripper) []bool {
	t.Helper()
	cache := tls.NewLRUClientSessionCache(8)
	var out []bool
	for _, u := range urls {
		cfg := base.Clone()
		cfg.ClientSessionCache = cache
		tr := transport(cfg)
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		_, _ = io.ReadAll(resp.Body) // the ticket comes after the handshake: read it with the answer
		resp.Body.Close()
		if c, ok := tr.(io.Closer); ok {
			_ = c.Close()
		} else if c, ok := tr.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
		out = append(out, resp.TLS.DidResume)
	}
	return out
}

func TestTicketsResumeOnTheOtherProxy(t *testing.T) {
	labs := ticketPair(t, true)
	base := &tls.Config{RootCAs: labs[0].roots, ServerName: "localhost", MinVersion: tls.VersionTLS13}
	a, b := labs[0].url("https", "/r"), labs[1].url("https", "/r")
	if got := resumedH1(t, base, a, b, a); got[0] || !got[1] || !got[2] {
		t.Fatalf("HTTP/1.1 over TLS: resumed %v, want [false true true]", got)
	}
	if n := testutil.ToFloat64(labs[1].p.metrics.listener.Handshakes.WithLabelValues("https", "tcp", "true")); n != 1 {
		t.Fatalf("proxy B counted %v resumed handshakes, want 1", n)
	}
	eventuallyResumedH3(t, base, a, b)
	// TLS 1.2 session tickets resume too.
	tls12 := base.Clone()
	tls12.MinVersion, tls12.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if got := resumedH1(t, tls12, a, b); got[0] || !got[1] {
		t.Fatalf("TLS 1.2: resumed %v, want [false true]", got)
	}
}

// eventuallyResumedH3: QUIC's ticket arrives after the handshake, so a
// fast second connection may not have it yet; a few tries, never a sleep
// to time it.
func eventuallyResumedH3(t *testing.T, base *tls.Config, a, b string) {
	t.Helper()
	for try := 0; try < 20; try++ {
		if got := resumedH3(t, base, a, b); !got[0] && got[1] {
			return
		}
	}
	t.Fatal("HTTP/3: a session from proxy A never resumed on proxy B")
}

func TestTicketsWithoutSharedStateDoNotResumeElsewhere(t *testing.T) {
	labs := ticketPair(t, false)
	base := &tls.Config{RootCAs: labs[0].roots, ServerName: "localhost", MinVersion: tls.VersionTLS13}
	a, b := labs[0].url("https", "/r"), labs[1].url("https", "/r")
	if got := resumedH1(t, base, a, b, a); got[0] || got[1] {
		t.Fatalf("resumed %v: proxies with their own keys resumed each other's sessions", got)
	}
}

// TestTicketsSurviveListenerChange: a snapshot that changes the listener's
// settings (a new generation and tls.Config) keeps the keys, so sessions
// resume across it; the same proxy resumes its own sessions.
func TestTicketsSurviveListenerChange(t *testing.T) {
	labs := ticketPair(t, false)
	l := labs[0]
	base := &tls.Config{RootCAs: l.roots, ServerName: "localhost", MinVersion: tls.VersionTLS13}
	cache := tls.NewLRUClientSessionCache(8)
	get := func() bool {
		cfg := base.Clone()
		cfg.ClientSessionCache = cache
		tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(l.url("https", "/r"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.TLS.DidResume
	}
	if get() {
		t.Fatal("the first handshake resumed")
	}
	c := l.h3Config(startUpstream(t, "app", nil).Addr())
	c.Listeners[0].IdleTimeoutMs = 61_000 // the same addresses (as configured), new settings: a new generation
	c.TLSSessionTickets = &snapshot.TicketPolicy{RotationMs: 600_000}
	c.Routes = []snapshot.Route{getRoute("r", "/r", "app")}
	l.apply(c)
	if !get() {
		t.Fatal("a session did not resume after the listener's settings changed")
	}
	// A new rotation starts a new key chain: the old session no longer resumes.
	c.Version.Sequence = 0
	c.TLSSessionTickets = &snapshot.TicketPolicy{RotationMs: 120_000}
	l.apply(c)
	if got := get(); got {
		t.Fatal("a session from before a rotation change resumed")
	}
}
