package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// processCPU is the CPU time (user + system) of the whole process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// chainBench runs the handler with or without perf/compare.sh's CHAIN=1
// policies on the same route: an EdDSA JWT with a required scope, a
// per-tenant quota, request and response header rules, every request in
// the access log (a real file) and every trace sampled (kept local). It
// reports cpu-ns/op, the whole process's CPU per request, since the access
// log is written by another goroutine that ns/op does not see.
func chainBench(b *testing.B, chain bool) {
	l := newLab(b)
	var token string
	if chain {
		f, err := os.OpenFile(filepath.Join(b.TempDir(), "access.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		l = newLabWith(b, Options{AccessLog: f})
	}
	c := l.config(cheapUpstream(b))
	r := getRoute("bench", "/bench/{id}", "app")
	if chain {
		is := newIssuer(b)
		one := 1.0
		c.Telemetry = snapshot.Telemetry{AccessLog: snapshot.AccessLog{SuccessSampleRate: &one},
			Tracing: snapshot.Tracing{SampleRatio: &one}}
		c.AuthPolicies = []snapshot.AuthPolicy{{ID: "jwt", Type: "jwt", JWT: &snapshot.JWTPolicy{
			Issuer: "https://id.test/", Audiences: []string{"api"}, Algorithms: []string{"EdDSA"}, JWKSFile: is.file,
			TenantClaim: "tenant", ScopesClaim: "scope"}}}
		c.QuotaPolicies = []snapshot.QuotaPolicy{{ID: "per-tenant", Key: []string{"tenant"}, RatePerSecond: 1e6, Burst: 1e6}}
		r.AuthPolicyID, r.RequiredScopes, r.QuotaPolicyID = "jwt", []string{"bench:read"}, "per-tenant"
		r.Headers = &snapshot.HeaderRules{
			Request:  snapshot.HeaderOps{Set: map[string]string{"X-Perf-Chain": "1"}},
			Response: snapshot.HeaderOps{Add: map[string]string{"X-Perf-Served-By": "rampart-chain"}},
		}
		token = is.token(map[string]any{"tenant": "perf-tenant", "scope": "bench:read profile",
			"exp": time.Now().Add(365 * 24 * time.Hour).Unix()})
	}
	c.Routes = []snapshot.Route{r}
	l.apply(c)
	h := &entry{p: l.p, listener: "https"}
	u, _ := url.Parse("https://localhost/bench/42")
	hdr := http.Header{"User-Agent": {"bench"}, "Accept": {"*/*"}}
	if chain {
		hdr.Set("Authorization", "Bearer "+token)
	}
	req := (&http.Request{Method: "GET", URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hdr, Host: "localhost", RequestURI: "/bench/42", RemoteAddr: "127.0.0.1:5555",
		Body: http.NoBody}).WithContext(context.Background())
	w := &statusWriter{h: http.Header{}}
	// one request first: the JWKS, the token cache and the pool warm up
	h.ServeHTTP(w, req)
	if w.status != 200 {
		b.Fatalf("first request: status %d", w.status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := processCPU(b)
	for b.Loop() {
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, req)
	}
	b.StopTimer()
	if w.status != 200 {
		b.Fatalf("status %d", w.status)
	}
	if chain && w.h.Get("X-Perf-Served-By") != "rampart-chain" {
		b.Fatalf("the response header rule did not run: %v", w.h)
	}
	l.p.accessLog.Close() // the queued lines are written: their CPU counts
	l.p.accessLog = nil
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// cheapUpstream answers every GET head it reads with benchResponse, doing
// no more than finding the blank line that ends each, so that cpu-ns/op is
// mostly the proxy's.
func cheapUpstream(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				have := 0
				for {
					n, err := c.Read(buf[have:])
					if err != nil {
						return
					}
					have += n
					for {
						i := bytes.Index(buf[:have], []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						if _, err := io.WriteString(c, benchResponse); err != nil {
							return
						}
						have = copy(buf, buf[i+4:have])
					}
					if have == len(buf) {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// statusWriter is discardWriter that keeps the status.
type statusWriter struct {
	h      http.Header
	status int
}

func (d *statusWriter) Header() http.Header         { return d.h }
func (d *statusWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *statusWriter) WriteHeader(s int)           { d.status = s }

// BenchmarkChain: the request path bare and with the full chain; the
// chain's cost is the difference of their cpu-ns/op.
func BenchmarkChain(b *testing.B) {
	b.Run("bare", func(b *testing.B) { chainBench(b, false) })
	b.Run("chain", func(b *testing.B) { chainBench(b, true) })
}
