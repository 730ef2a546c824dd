package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

func TestParseFlagsRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-rate", "0", "https://x/"},
		{"-rate", "2e6", "https://x/"},
		{"-d", "0s", "https://x/"},
		{"-proto", "h4", "https://x/"},
		{"-c", "0", "https://x/"},
		{"-max-inflight", "0", "https://x/"},
		{"-H", "novalue", "https://x/"},
		{"https://x/", "https://y/"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	c, err := parseFlags([]string{"-rate", "500", "-H", "Authorization: Bearer t", "https://x/"})
	if err != nil || c.rate != 500 || c.header.Get("Authorization") != "Bearer t" || c.url != "https://x/" {
		t.Fatalf("got %+v, %v", c, err)
	}
}

func TestRunSendsTheScheduleAndCounts(t *testing.T) {
	var hits, withHeader atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Test") == "1" {
			withHeader.Add(1)
		}
		if r.URL.Path == "/bad" {
			w.WriteHeader(503)
			return
		}
		w.Write([]byte("ok"))
	}))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		proto string
		new   bool
	}{{"h1", false}, {"h1", true}, {"h2", false}, {"h2", true}} {
		hits.Store(0)
		withHeader.Store(0)
		conns.Store(0)
		c, err := parseFlags([]string{"-rate", "200", "-d", "500ms", "-c", "4", "-proto", tc.proto,
			"-new=" + map[bool]string{true: "true", false: "false"}[tc.new], "-H", "X-Test: 1", srv.URL + "/bench"})
		if err != nil {
			t.Fatal(err)
		}
		r := run(context.Background(), c)
		if r.Sent != 100 || r.OK != 100 || r.Errors != 0 || r.Non2xx != 0 || len(r.Latencies) != 100 {
			t.Fatalf("%s new=%v: %+v", tc.proto, tc.new, r)
		}
		if hits.Load() != 100 || withHeader.Load() != 100 {
			t.Fatalf("%s: server saw %d requests, %d with the header", tc.proto, hits.Load(), withHeader.Load())
		}
		if n := conns.Load(); (tc.new && n != 100) || (!tc.new && n > 4) {
			t.Fatalf("%s new=%v: %d connections for 100 requests", tc.proto, tc.new, n)
		}
		for i := 1; i < len(r.Latencies); i++ {
			if r.Latencies[i] < r.Latencies[i-1] {
				t.Fatal("latencies not sorted")
			}
		}
		var out bytes.Buffer
		report(&out, c, r)
		if !strings.Contains(out.String(), "requests: 100\n") || !strings.Contains(out.String(), "latency_us: p50=") {
			t.Fatalf("report:\n%s", out.String())
		}
	}
	c, _ := parseFlags([]string{"-rate", "100", "-d", "200ms", srv.URL + "/bad"})
	if r := run(context.Background(), c); r.Non2xx != 20 || r.OK != 0 {
		t.Fatalf("503s: %+v", r)
	}
}

func TestQuantile(t *testing.T) {
	var l []time.Duration
	if quantile(l, .99) != 0 {
		t.Fatal("empty")
	}
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i))
	}
	if quantile(l, .5) != 50 || quantile(l, .99) != 99 || quantile(l, 1) != 100 {
		t.Fatalf("p50 %d p99 %d max %d", quantile(l, .5), quantile(l, .99), quantile(l, 1))
	}
}

// TestRunH3 loads an in-process HTTP/3 server over keep-alive connections and
// with a new QUIC connection per request.
func TestRunH3(t *testing.T) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("UDP on loopback: %v", err)
	}
	var hits atomic.Int64
	srv := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{testCert(t)}}),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			_, _ = w.Write([]byte("ok"))
		}),
	}
	go func() { _ = srv.Serve(udp) }()
	defer srv.Close()
	for _, nw := range []string{"false", "true"} {
		hits.Store(0)
		c, err := parseFlags([]string{"-rate", "100", "-d", "500ms", "-c", "2", "-proto", "h3", "-new=" + nw,
			"https://" + udp.LocalAddr().String() + "/bench"})
		if err != nil {
			t.Fatal(err)
		}
		r := run(context.Background(), c)
		if r.Sent != 50 || r.OK != 50 || r.Errors != 0 || hits.Load() != 50 {
			t.Fatalf("h3 new=%s: %+v (error sample %q), server saw %d", nw, r, r.ErrSample, hits.Load())
		}
	}
}

func testCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
