// Package telemetry makes the gateway span of each request: W3C trace
// context in and out (traceparent, tracestate), parent-based ratio
// sampling, and export over OTLP/HTTP off the request path.
//
// Every request gets a span id and passes a traceparent upstream, so a
// trace continues through the gateway whether or not anything is exported.
// Only a sampled span with an exporter configured is recorded (through the
// OpenTelemetry SDK); every other span is a pair of ids on the stack.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// SpanName is the name of the gateway span.
const SpanName = "gateway"

// Export bounds: the queue drops spans when full (the request path never
// waits), and one export (all its retries included) gives up quickly.
const (
	exportQueue   = 4096
	exportBatch   = 512
	batchTimeout  = 2 * time.Second
	exportTimeout = 3 * time.Second
	// A replaced exporter keeps taking the spans of requests still in
	// flight for up to retireWait, then flushes for up to retireFlush.
	retireWait  = 30 * time.Second
	retireFlush = 5 * time.Second
	// shutdownGrace is the flush time Shutdown gives itself when its
	// context has already ended.
	shutdownGrace = time.Second
)

// Tracer starts and ends gateway spans. Configure it from each snapshot;
// Start and End are safe for concurrent use with Configure and each other.
type Tracer struct {
	cur atomic.Pointer[state]

	mu       sync.Mutex // serialises Configure and Shutdown
	closed   bool
	stop     chan struct{}
	retiring sync.WaitGroup

	log            *slog.Logger
	recorded       prometheus.Counter
	exportedOK     prometheus.Counter
	exportedFailed prometheus.Counter
	lastErrLog     atomic.Int64 // unix nanos of the last export error logged
}

// state is one configuration: immutable once published, except inflight.
type state struct {
	endpoint string
	ratio    float64
	service  string
	root     sdktrace.Sampler         // TraceIDRatioBased(ratio): decides new traces
	tp       *sdktrace.TracerProvider // nil: nothing is exported
	tracer   trace.Tracer
	inflight atomic.Int64 // recording spans not yet ended
}

// NewTracer returns a tracer that does nothing until Configure, and
// registers its counters on reg (nil: not registered).
func NewTracer(reg prometheus.Registerer, log *slog.Logger) *Tracer {
	if log == nil {
		log = slog.Default()
	}
	exported := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rampart_trace_spans_exported_total",
		Help: "Gateway spans handed to the OTLP collector, by result (ok, failed).",
	}, []string{"result"})
	t := &Tracer{
		stop: make(chan struct{}),
		log:  log,
		recorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rampart_trace_spans_recorded_total",
			Help: "Gateway spans recorded for export (sampled, with an OTLP endpoint); those neither exported nor failed were dropped by a full queue or are still queued.",
		}),
		exportedOK:     exported.WithLabelValues("ok"),
		exportedFailed: exported.WithLabelValues("failed"),
	}
	if reg != nil {
		reg.MustRegister(t.recorded, exported)
	}
	return t
}

// Configure applies a snapshot's tracing settings. An unchanged config
// changes nothing; otherwise new requests use the new settings at once, and
// a replaced exporter finishes the spans in flight before it is flushed and
// closed in the background. On error the previous settings stay.
func (t *Tracer) Configure(c snapshot.Tracing) error {
	ratio := snapshot.DefaultTraceSampleRatio
	if c.SampleRatio != nil {
		ratio = *c.SampleRatio
	}
	service := c.ServiceName
	if service == "" {
		service = "rampart"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("tracer is shut down")
	}
	old := t.cur.Load()
	if old != nil && old.endpoint == c.OTLPEndpoint && old.ratio == ratio && old.service == service {
		return nil
	}
	st := &state{endpoint: c.OTLPEndpoint, ratio: ratio, service: service, root: sdktrace.TraceIDRatioBased(ratio)}
	if c.OTLPEndpoint != "" {
		exp, err := newExporter(c.OTLPEndpoint)
		if err != nil {
			return err
		}
		bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, t: t},
			sdktrace.WithMaxQueueSize(exportQueue), sdktrace.WithMaxExportBatchSize(exportBatch),
			sdktrace.WithBatchTimeout(batchTimeout), sdktrace.WithExportTimeout(exportTimeout))
		st.tp = sdktrace.NewTracerProvider(
			sdktrace.WithSampler(sdktrace.ParentBased(st.root)),
			sdktrace.WithIDGenerator(idGenerator{}),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
			sdktrace.WithSpanProcessor(bsp))
		st.tracer = st.tp.Tracer("github.com/rampart-edge/rampart/l7/telemetry")
	}
	t.cur.Store(st)
	if old != nil && old.tp != nil {
		t.retire(old)
	}
	return nil
}

// newExporter makes an OTLP/HTTP exporter; an endpoint without a path
// posts to /v1/traces.
func newExporter(endpoint string) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("otlp endpoint %q is not an http(s) URL", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(u.String()),
		otlptracehttp.WithTimeout(exportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true,
			InitialInterval: 200 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 2 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %q: %w", endpoint, err)
	}
	return exp, nil
}

// retire flushes and closes a replaced exporter once its spans in flight
// have ended (or retireWait passed, or the tracer is shutting down).
func (t *Tracer) retire(st *state) {
	t.retiring.Add(1)
	go func() {
		defer t.retiring.Done()
		deadline := time.NewTimer(retireWait)
		defer deadline.Stop()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
	wait:
		for st.inflight.Load() > 0 {
			select {
			case <-tick.C:
			case <-deadline.C:
				break wait
			case <-t.stop:
				break wait
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), retireFlush)
		defer cancel()
		if err := st.tp.Shutdown(ctx); err != nil {
			t.log.Warn("tracing: closing the previous exporter", "endpoint", st.endpoint, "err", err)
		}
	}()
}

// Shutdown flushes and closes the exporter (and any being retired) within
// ctx; when ctx has already ended, it allows itself a short grace. After
// Shutdown, Start returns empty spans.
func (t *Tracer) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	st := t.cur.Swap(nil)
	t.mu.Unlock()
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
	}
	var err error
	if st != nil && st.tp != nil {
		err = st.tp.Shutdown(ctx)
	}
	done := make(chan struct{})
	go func() { t.retiring.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("retired exporters: %w", ctx.Err()))
	}
	return err
}

// Span is one request's gateway span. The zero Span (no tracer config) has
// no ids and does nothing.
type Span struct {
	traceID trace.TraceID
	span    trace.Span // non-nil only while recording
	st      *state
}

// TraceID is the span's trace id (zero for the zero Span).
func (s *Span) TraceID() trace.TraceID { return s.traceID }

// Recording reports whether the span will be exported when it ends.
func (s *Span) Recording() bool { return s.span != nil }

// Attrs are what the gateway span records about its request.
type Attrs struct {
	Method, Path, Host, Route, Revision, Upstream, RequestID string
	Status                                                   int
}

// End finishes a recording span with the request's attributes; on any
// other span it does nothing. Call it once.
func (s *Span) End(a *Attrs) {
	if s.span == nil {
		return
	}
	kv := make([]attribute.KeyValue, 0, 8)
	kv = append(kv,
		attribute.String("http.request.method", a.Method),
		attribute.String("url.path", a.Path),
		attribute.String("server.address", a.Host),
		attribute.Int("http.response.status_code", a.Status),
		attribute.String("rampart.request_id", a.RequestID))
	if a.Route != "" {
		kv = append(kv, attribute.String("http.route", a.Route), attribute.String("rampart.revision", a.Revision))
	}
	if a.Upstream != "" {
		kv = append(kv, attribute.String("rampart.upstream", a.Upstream))
	}
	s.span.SetAttributes(kv...)
	if a.Status >= 500 {
		s.span.SetStatus(codes.Error, "")
	}
	s.span.End()
	s.span = nil
	s.st.inflight.Add(-1)
}

// Start begins the gateway span of a request whose header section is h. It
// continues an incoming traceparent (same trace id, the incoming span as
// parent, its sampled flag honoured) or starts a new trace sampled at the
// configured ratio, then writes the gateway span's traceparent into h, so
// the upstream sees the gateway as the parent. start is the request's
// arrival time.
//
// Unless the span is recorded, this does not allocate beyond the
// traceparent string.
func (t *Tracer) Start(h http.Header, start time.Time) Span {
	st := t.cur.Load()
	if st == nil {
		return Span{}
	}
	in := h["Traceparent"]
	var tid trace.TraceID
	var flags trace.TraceFlags
	var parent bool
	if len(in) == 1 { // several traceparent fields are invalid
		tid, _, flags, parent = parseTraceparent(in[0])
	}
	var sampled bool
	if parent {
		sampled = flags.IsSampled() // ParentBased: the remote parent decides
	} else {
		tid, flags = newTraceID(), 0
		sampled = st.root.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: tid}).Decision == sdktrace.RecordAndSample
		if _, ok := h["Tracestate"]; ok {
			delete(h, "Tracestate") // belongs to a trace that is not continued
		}
	}
	if sampled && st.tp != nil {
		return t.startRecording(st, h, parent, tid, start)
	}
	v := formatTraceparent(tid, newSpanID(), flags.WithSampled(sampled))
	if len(in) == 1 {
		in[0] = v
	} else {
		h["Traceparent"] = []string{v}
	}
	return Span{traceID: tid}
}

// startRecording starts an SDK span: the parent comes from
// propagation.TraceContext, and a new trace keeps the id already drawn so
// the SDK's sampler decides on the same id.
func (t *Tracer) startRecording(st *state, h http.Header, parent bool, tid trace.TraceID, start time.Time) Span {
	var tc propagation.TraceContext
	carrier := propagation.HeaderCarrier(h)
	ctx := context.Background()
	if parent {
		ctx = tc.Extract(ctx, carrier)
	} else {
		ctx = context.WithValue(ctx, presetTraceID{}, tid)
	}
	st.inflight.Add(1)
	ctx, sp := st.tracer.Start(ctx, SpanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	tc.Inject(ctx, carrier)
	if !sp.IsRecording() { // cannot happen with the same sampler; be safe
		st.inflight.Add(-1)
		return Span{traceID: sp.SpanContext().TraceID()}
	}
	t.recorded.Inc()
	return Span{traceID: sp.SpanContext().TraceID(), span: sp, st: st}
}

type presetTraceID struct{}

// idGenerator is the SDK's random generator, except that a new trace takes
// the id preset in its context.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if tid, ok := ctx.Value(presetTraceID{}).(trace.TraceID); ok && tid.IsValid() {
		return tid, newSpanID()
	}
	return newTraceID(), newSpanID()
}

func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

// countingExporter counts spans by export result and logs failures at most
// every 30 s, instead of the SDK's global error handler.
type countingExporter struct {
	sdktrace.SpanExporter
	t *Tracer
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		e.t.exportedOK.Add(float64(len(spans)))
		return nil
	}
	e.t.exportedFailed.Add(float64(len(spans)))
	now := time.Now().UnixNano()
	if last := e.t.lastErrLog.Load(); now-last > int64(30*time.Second) && e.t.lastErrLog.CompareAndSwap(last, now) {
		e.t.log.Warn("tracing: span export failed", "spans", len(spans), "err", err)
	}
	return nil
}
