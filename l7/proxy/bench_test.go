package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/snapshot/snapgen"
)

// benchResponse is a keep-alive upstream answer with a 100-byte body.
const benchResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n" +
	"0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"

func benchSetup(b *testing.B) *lab {
	l := newLab(b)
	c := l.config(rawUpstream(b, benchResponse, false))
	c.Routes = []snapshot.Route{getRoute("bench", "/bench/{id}", "app")}
	l.apply(c)
	return l
}

func benchRoundTrip(b *testing.B, client *http.Client, url string) {
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// Whole round trips in one process: client, TLS, proxy, upstream.
func BenchmarkRoundTripH1TLS(b *testing.B) {
	l := benchSetup(b)
	benchRoundTrip(b, l.h1(), l.url("https", "/bench/42"))
}

func BenchmarkRoundTripH2TLS(b *testing.B) {
	l := benchSetup(b)
	benchRoundTrip(b, l.h2(), l.url("https", "/bench/42"))
}

// discardWriter is a minimal ResponseWriter, so the benchmark counts only
// what the proxy's request path costs.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// The proxy's own request path: match, pick, write upstream, read and copy
// the response, metrics and the (disabled) access log.
func BenchmarkHandler(b *testing.B) {
	l := benchSetup(b)
	h := &entry{p: l.p, listener: "https"}
	u, _ := url.Parse("https://localhost/bench/42")
	req := (&http.Request{Method: "GET", URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"User-Agent": {"bench"}, "Accept": {"*/*"}}, Host: "localhost",
		RequestURI: "/bench/42", RemoteAddr: "127.0.0.1:5555", Body: http.NoBody}).WithContext(context.Background())
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	if !strings.HasPrefix(w.h.Get("Content-Type"), "text/plain") {
		b.Fatalf("unexpected response headers %v", w.h)
	}
}

// BenchmarkBuildRuntime20k: the proxy's work to activate a verified
// 20,000-route snapshot (route table, clusters, pools), and the heap the
// active runtime plus its snapshot hold.
func BenchmarkBuildRuntime20k(b *testing.B) {
	l := newLab(b)
	c := snapgen.Config(200, 103)
	c.Listeners = nil
	c.Listeners = l.config().Listeners
	s := l.snap(c)
	m := NewMetrics()
	set := cluster.NewSet(m.cluster, slog.New(slog.NewTextHandler(io.Discard, nil)), "")
	defer set.Close()
	env := &runtimeEnv{clusters: set, metrics: m}
	var rt *Runtime
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var err error
		rt, err = buildRuntime(s, env, nil)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "runtime-heap-bytes")
	}
	runtime.KeepAlive(rt)
	b.ReportMetric(float64(len(s.Config.Routes)), "routes")
}

// BenchmarkResiliencePath: what every request pays for resilience —
// admission (global, route, breaker), the endpoint pick with health,
// ejection and region checks, the outlier report, and release.
func BenchmarkResiliencePath(b *testing.B) {
	l := newLab(b)
	c := l.config("127.0.0.1:1", "127.0.0.2:1", "127.0.0.3:1")
	c.Clusters[0].HealthCheck = nil
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	rt := l.p.Active()
	rr := &rt.routes[0]
	cl := rt.clusters["app"]
	w := &discardWriter{h: http.Header{}}
	f := &forwarding{p: l.p, w: w, rr: rr, cl: cl, log: &accesslog.Entry{}}
	b.ReportAllocs()
	for b.Loop() {
		f.admitted = 0
		if !f.admit() {
			b.Fatal("not admitted")
		}
		ep, _ := cl.Pick(nil, nil)
		cl.Report(ep, 200, false)
		f.release()
	}
}
