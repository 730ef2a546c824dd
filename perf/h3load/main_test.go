package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
)

func TestHistogramBuckets(t *testing.T) {
	// Every value lies within its bucket, and buckets are contiguous.
	prev := -1
	for _, us := range []uint64{0, 1, 7, 8, 9, 15, 16, 17, 100, 1000, 12345, 1 << 40, 1<<63 + 5} {
		i := bucketOf(us)
		if us > upper(i) || (i > 0 && us <= upper(i-1)) {
			t.Errorf("%d µs in bucket %d = (%d, %d]", us, i, upper(i-1), upper(i))
		}
		if i < prev {
			t.Errorf("bucket of %d µs (%d) below the previous value's (%d)", us, i, prev)
		}
		prev = i
	}
	var h histogram
	for i := range 100 {
		h.record(time.Duration(i+1) * time.Millisecond)
	}
	if p50 := h.quantile(0.5); p50 < 50_000 || p50 > 50_000*9/8 {
		t.Errorf("p50 of 1..100 ms = %d µs", p50)
	}
}

// TestRun loads a local HTTP/3 server briefly: every request is a 2xx and no
// connection is dialled twice.
func TestRun(t *testing.T) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("no UDP on loopback: %v", err)
	}
	srv := &http3.Server{
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/auth" && r.Header.Get("Authorization") != "Bearer t0ken" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if r.URL.Path != "/bench" && r.URL.Path != "/auth" {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write([]byte("hello"))
		}),
	}
	go func() { _ = srv.Serve(udp) }()
	t.Cleanup(func() { _ = srv.Close(); _ = udp.Close() })

	base := "https://" + udp.LocalAddr().String()
	cfg := config{url: base + "/bench", conns: 2, streams: 3, duration: 200 * time.Millisecond, grace: time.Second, insecure: true}
	r, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.ok == 0 || r.errs != 0 || r.dials != 2 || r.status[4] != 0 {
		t.Errorf("ok=%d errs=%d dials=%d status=%v errors=%v", r.ok, r.errs, r.dials, r.status, r.errTexts)
	}
	if r.tls == "" {
		t.Error("no TLS description")
	}

	cfg.url = base + "/missing" // 404s are counted, not errors
	if r, err = run(cfg); err == nil && (r.ok != 0 || r.status[4] == 0) {
		t.Errorf("/missing: ok=%d status=%v", r.ok, r.status)
	}

	cfg.url = base + "/auth" // -H headers go on every request, the connect phase's too
	var hdr headerFlags
	if err := hdr.Set("Authorization: Bearer t0ken"); err != nil {
		t.Fatal(err)
	}
	cfg.header = hdr.h
	if r, err = run(cfg); err != nil {
		t.Errorf("/auth with -H: %v", err)
	} else if r.ok == 0 || r.status[4] != 0 {
		t.Errorf("/auth with -H: ok=%d status=%v", r.ok, r.status)
	}
	cfg.header = nil
	if r, err = run(cfg); err == nil && (r.ok != 0 || r.status[4] == 0) {
		t.Errorf("/auth without -H: ok=%d status=%v", r.ok, r.status)
	}
	for _, bad := range []string{"NoColon", ": v", "Bad Name: v"} {
		if err := hdr.Set(bad); err == nil {
			t.Errorf("-H %q accepted", bad)
		}
	}

	cfg.url, cfg.insecure = base+"/bench", false // the self-signed cert is refused
	if _, err := run(cfg); err == nil {
		t.Error("run with certificate verification: no error")
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
