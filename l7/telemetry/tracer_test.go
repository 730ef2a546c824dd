package telemetry

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/telemetry/otlptest"
)

func ratio(v float64) *float64 { return &v }

func newTestTracer(t testing.TB, c snapshot.Tracing) *Tracer {
	t.Helper()
	tr := NewTracer(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := tr.Configure(c); err != nil {
		t.Fatalf("configure %+v: %v", c, err)
	}
	t.Cleanup(func() { shutdown(t, tr) })
	return tr
}

func shutdown(t testing.TB, tr *Tracer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Logf("shutdown: %v", err)
	}
}

const (
	parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
)

func parseOut(t *testing.T, h http.Header) (tid, sid string, sampled bool) {
	t.Helper()
	vv := h["Traceparent"]
	if len(vv) != 1 {
		t.Fatalf("traceparent fields after Start: %q", vv)
	}
	tp, sp, flags, ok := parseTraceparent(vv[0])
	if !ok || vv[0][:3] != "00-" {
		t.Fatalf("traceparent after Start is not a valid version-00 value: %q", vv[0])
	}
	return tp.String(), sp.String(), flags.IsSampled()
}

func TestStartContinuesIncomingTrace(t *testing.T) {
	col := otlptest.Start(t)
	for _, endpoint := range []string{"", col.URL} {
		for _, flags := range []string{"00", "01"} {
			tr := newTestTracer(t, snapshot.Tracing{OTLPEndpoint: endpoint, SampleRatio: ratio(0.5)})
			h := http.Header{
				"Traceparent": {"00-" + parentTrace + "-" + parentSpan + "-" + flags},
				"Tracestate":  {"vendor=abc,other=1"},
			}
			sp := tr.Start(h, time.Now())
			tid, sid, sampled := parseOut(t, h)
			if tid != parentTrace || sp.TraceID().String() != parentTrace {
				t.Errorf("endpoint %q flags %s: trace id %s (span says %s), want the incoming %s", endpoint, flags, tid, sp.TraceID(), parentTrace)
			}
			if sid == parentSpan {
				t.Errorf("endpoint %q flags %s: the gateway did not put its own span id in traceparent", endpoint, flags)
			}
			if sampled != (flags == "01") {
				t.Errorf("endpoint %q flags %s: sampled %v, want the incoming decision", endpoint, flags, sampled)
			}
			if got := h.Get("Tracestate"); got != "vendor=abc,other=1" {
				t.Errorf("endpoint %q flags %s: tracestate %q, want it passed on", endpoint, flags, got)
			}
			if want := endpoint != "" && flags == "01"; sp.Recording() != want {
				t.Errorf("endpoint %q flags %s: recording %v, want %v", endpoint, flags, sp.Recording(), want)
			}
			sp.End(&Attrs{Status: 200})
		}
	}
}

func TestStartNewTrace(t *testing.T) {
	for _, r := range []float64{0, 1} {
		tr := newTestTracer(t, snapshot.Tracing{SampleRatio: ratio(r)})
		seen := map[string]bool{}
		for i := 0; i < 1000; i++ {
			h := http.Header{}
			switch i % 3 {
			case 1:
				h["Traceparent"] = []string{"00-zz-not-a-traceparent"}
				h["Tracestate"] = []string{"vendor=abc"}
			case 2: // two traceparent fields are invalid too
				h["Traceparent"] = []string{"00-" + parentTrace + "-" + parentSpan + "-01", "00-" + parentTrace + "-" + parentSpan + "-01"}
			}
			sp := tr.Start(h, time.Now())
			tid, _, sampled := parseOut(t, h)
			if tid == parentTrace || sp.TraceID().String() != tid {
				t.Fatalf("ratio %v: trace id %s (span %s), want a new one", r, tid, sp.TraceID())
			}
			if seen[tid] {
				t.Fatalf("trace id %s drawn twice", tid)
			}
			seen[tid] = true
			if sampled != (r == 1) {
				t.Fatalf("ratio %v: sampled %v", r, sampled)
			}
			if _, ok := h["Tracestate"]; ok {
				t.Fatalf("tracestate of a trace not continued was passed on: %q", h["Tracestate"])
			}
			sp.End(&Attrs{})
		}
	}
}

func TestNewTraceSampleRatio(t *testing.T) {
	const n, p = 20000, 0.25
	tr := newTestTracer(t, snapshot.Tracing{SampleRatio: ratio(p)})
	sampled := 0
	for i := 0; i < n; i++ {
		h := http.Header{}
		tr.Start(h, time.Now())
		if _, _, s := parseOut(t, h); s {
			sampled++
		}
	}
	if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(sampled)-n*p) > 6*sd {
		t.Fatalf("%d of %d new traces sampled at ratio %v", sampled, n, p)
	}
}

func TestNoConfigDoesNothing(t *testing.T) {
	tr := NewTracer(nil, nil)
	h := http.Header{}
	sp := tr.Start(h, time.Now())
	if len(h) != 0 || sp.TraceID().IsValid() || sp.Recording() {
		t.Fatalf("an unconfigured tracer touched the request: %v %v", h, sp.TraceID())
	}
	sp.End(&Attrs{})
}

func TestExportSampled(t *testing.T) {
	col := otlptest.Start(t)
	tr := newTestTracer(t, snapshot.Tracing{OTLPEndpoint: col.URL, SampleRatio: ratio(1), ServiceName: "edge-test"})
	type sent struct{ trace, span, parent string }
	var want []sent
	for i, incoming := range []string{"", "00-" + parentTrace + "-" + parentSpan + "-01"} {
		h := http.Header{}
		if incoming != "" {
			h.Set("Traceparent", incoming)
		}
		sp := tr.Start(h, time.Now())
		if !sp.Recording() {
			t.Fatalf("request %d: span not recorded at ratio 1", i)
		}
		tid, sid, sampled := parseOut(t, h)
		if !sampled {
			t.Fatalf("request %d: traceparent not sampled", i)
		}
		parent := ""
		if incoming != "" {
			parent = parentSpan
		}
		want = append(want, sent{tid, sid, parent})
		sp.End(&Attrs{Method: "GET", Path: "/v1/users/7", Host: "api.example.com", Route: "get-user",
			Revision: "users-canary", Upstream: "10.0.0.1:8080", RequestID: "r1", Status: 503})
	}
	shutdown(t, tr) // flushes
	if p := col.Problems(); len(p) > 0 {
		t.Fatalf("collector saw bad requests: %v", p)
	}
	spans := col.Spans()
	if len(spans) != len(want) {
		t.Fatalf("collector got %d spans, want %d: %+v", len(spans), len(want), spans)
	}
	for i, s := range spans {
		w := want[i]
		if s.TraceID != w.trace || s.SpanID != w.span || s.ParentSpanID != w.parent {
			t.Errorf("span %d: trace %s span %s parent %q, want %s %s %q", i, s.TraceID, s.SpanID, s.ParentSpanID, w.trace, w.span, w.parent)
		}
		if s.Name != SpanName || s.Kind != tracepb.Span_SPAN_KIND_SERVER || s.Service != "edge-test" {
			t.Errorf("span %d: name %q kind %v service %q", i, s.Name, s.Kind, s.Service)
		}
		for k, v := range map[string]string{"http.request.method": "GET", "url.path": "/v1/users/7",
			"server.address": "api.example.com", "http.route": "get-user", "rampart.revision": "users-canary",
			"rampart.upstream": "10.0.0.1:8080", "http.response.status_code": "503", "rampart.request_id": "r1"} {
			if s.Attrs[k] != v {
				t.Errorf("span %d: attribute %s = %q, want %q", i, k, s.Attrs[k], v)
			}
		}
	}
	if got := testutil.ToFloat64(tr.exportedOK); got != 2 {
		t.Errorf("exported ok counter %v, want 2", got)
	}
}

func TestExportRatioZero(t *testing.T) {
	col := otlptest.Start(t)
	tr := newTestTracer(t, snapshot.Tracing{OTLPEndpoint: col.URL, SampleRatio: ratio(0)})
	for i := 0; i < 200; i++ {
		h := http.Header{}
		if i%2 == 1 {
			h.Set("Traceparent", "00-"+parentTrace+"-"+parentSpan+"-00") // unsampled parent
		}
		sp := tr.Start(h, time.Now())
		if sp.Recording() {
			t.Fatalf("request %d recorded at ratio 0", i)
		}
		sp.End(&Attrs{})
	}
	// An incoming sampled trace is still honoured.
	h := http.Header{"Traceparent": {"00-" + parentTrace + "-" + parentSpan + "-01"}}
	sp := tr.Start(h, time.Now())
	sp.End(&Attrs{Status: 200})
	shutdown(t, tr)
	spans := col.Spans()
	if len(spans) != 1 || spans[0].TraceID != parentTrace || spans[0].ParentSpanID != parentSpan {
		t.Fatalf("at ratio 0 the collector got %+v, want only the span of the sampled incoming trace", spans)
	}
}

// A replaced exporter still takes the spans that started on it.
func TestReconfigureKeepsSpansInFlight(t *testing.T) {
	a, b := otlptest.Start(t), otlptest.Start(t)
	tr := newTestTracer(t, snapshot.Tracing{OTLPEndpoint: a.URL, SampleRatio: ratio(1)})
	h1 := http.Header{}
	s1 := tr.Start(h1, time.Now())
	if err := tr.Configure(snapshot.Tracing{OTLPEndpoint: b.URL, SampleRatio: ratio(1)}); err != nil {
		t.Fatal(err)
	}
	h2 := http.Header{}
	s2 := tr.Start(h2, time.Now())
	s1.End(&Attrs{Status: 200})
	s2.End(&Attrs{Status: 200})
	shutdown(t, tr)
	if sa, sb := a.Spans(), b.Spans(); len(sa) != 1 || len(sb) != 1 ||
		sa[0].TraceID != s1.TraceID().String() || sb[0].TraceID != s2.TraceID().String() {
		t.Fatalf("old collector got %+v, new one %+v; want one span each", sa, sb)
	}
	// Unchanged settings keep the exporter.
	tr2 := newTestTracer(t, snapshot.Tracing{OTLPEndpoint: a.URL, SampleRatio: ratio(1)})
	before := tr2.cur.Load()
	_ = tr2.Configure(snapshot.Tracing{OTLPEndpoint: a.URL, SampleRatio: ratio(1)})
	if tr2.cur.Load() != before {
		t.Fatal("an unchanged config replaced the exporter")
	}
}

// Requests and reconfigurations at once (run with -race).
func TestConcurrentReconfigure(t *testing.T) {
	col := otlptest.Start(t)
	tr := newTestTracer(t, snapshot.Tracing{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h := http.Header{"Traceparent": {"00-" + parentTrace + "-" + parentSpan + "-01"}}
				sp := tr.Start(h, time.Now())
				sp.End(&Attrs{Status: 200})
			}
		}()
	}
	cfgs := []snapshot.Tracing{{}, {OTLPEndpoint: col.URL, SampleRatio: ratio(1)}, {OTLPEndpoint: col.URL, SampleRatio: ratio(0.5)}, {SampleRatio: ratio(1)}}
	for i := 0; i < 40; i++ {
		if err := tr.Configure(cfgs[i%len(cfgs)]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	shutdown(t, tr)
	rec := testutil.ToFloat64(tr.recorded)
	if got := float64(len(col.Spans())); got > rec {
		t.Fatalf("collector got %v spans, only %v were recorded", got, rec)
	}
	if p := col.Problems(); len(p) > 0 {
		t.Fatal(p)
	}
}

// A collector that takes connections and never answers costs the request
// path nothing: spans beyond the queue are dropped, and Start/End never wait.
func TestBlackholeCollectorDoesNotBlock(t *testing.T) {
	tr := newTestTracer(t, snapshot.Tracing{OTLPEndpoint: otlptest.Blackhole(t), SampleRatio: ratio(1)})
	const n = 3 * exportQueue
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i++ {
			sp := tr.Start(http.Header{}, time.Now())
			sp.End(&Attrs{Status: 200})
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d spans against a hung collector did not complete", n)
	}
	if got := testutil.ToFloat64(tr.recorded); got != n {
		t.Fatalf("recorded %v spans, want %d", got, n)
	}
	// Shutdown cannot flush to it, and gives up when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := tr.Shutdown(ctx); err == nil {
		t.Fatal("shutdown reported a flush to a hung collector as complete")
	}
}

func TestConfigureRejectsBadEndpoint(t *testing.T) {
	tr := newTestTracer(t, snapshot.Tracing{SampleRatio: ratio(1)})
	before := tr.cur.Load()
	if err := tr.Configure(snapshot.Tracing{OTLPEndpoint: "ftp://x"}); err == nil {
		t.Fatal("ftp endpoint accepted")
	}
	if tr.cur.Load() != before {
		t.Fatal("a failed Configure changed the active settings")
	}
}

// BenchmarkSpan is the request path's cost of the gateway span: extract,
// sample, new ids, traceparent out, end.
func BenchmarkSpan(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	b.Cleanup(sink.Close)
	incoming := func(flags string) string { return "00-" + parentTrace + "-" + parentSpan + "-" + flags }
	for _, c := range []struct {
		name     string
		cfg      snapshot.Tracing
		incoming string
	}{
		{"no-export/new-trace", snapshot.Tracing{SampleRatio: ratio(0.01)}, ""},
		{"no-export/continue", snapshot.Tracing{SampleRatio: ratio(0.01)}, incoming("01")},
		{"export-sampled-out/new-trace", snapshot.Tracing{OTLPEndpoint: sink.URL, SampleRatio: ratio(0)}, ""},
		{"export-sampled-out/continue", snapshot.Tracing{OTLPEndpoint: sink.URL, SampleRatio: ratio(0.01)}, incoming("00")},
		{"export-sampled/new-trace", snapshot.Tracing{OTLPEndpoint: sink.URL, SampleRatio: ratio(1)}, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			tr := newTestTracer(b, c.cfg)
			h := http.Header{"User-Agent": {"bench"}}
			if c.incoming != "" {
				h["Traceparent"] = []string{c.incoming}
			}
			a := Attrs{Method: "GET", Path: "/bench/42", Host: "localhost", Route: "bench", Revision: "app", Upstream: "127.0.0.1:1", Status: 200}
			start := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if c.incoming == "" {
					delete(h, "Traceparent")
				} else {
					h["Traceparent"][0] = c.incoming
				}
				sp := tr.Start(h, start)
				sp.End(&a)
			}
		})
	}
}
