package proxy

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/telemetry"
)

// accessEntry is one request's log line, filled on the request path and
// encoded on the log writer's goroutine.
type accessEntry struct {
	start    time.Time
	dur      time.Duration
	reqID    string
	traceID  [16]byte // the gateway span's trace id; zero: none
	remote   string
	proto    string
	method   string
	host     string
	path     string
	route    string
	revision string
	upstream string
	status   int
	bytes    int64
	err      string
	// security marks a shed, deny or authentication failure: logged like
	// an error (within the error budget) and flagged "security":true.
	// Statuses 401, 403 and 429 count as security events by themselves.
	security bool

	// The verified identity, when the route authenticates.
	tenant  string
	subject string
	keyID   string

	// req is the request, read by write while the handler still owns it
	// (for the query and the configured headers) and never queued: the
	// HTTP/1.1 server reuses the request and its header map afterwards.
	req *http.Request

	// Filled by write for the writer goroutine.
	query   string     // raw query as sent; redacted when encoded
	headers []string   // values of pol.headers, in order; "" when absent
	pol     *logPolicy // the policy the entry was admitted under
}

// accessLog hands entries to a writer goroutine through a bounded queue;
// when the writer falls behind, entries are dropped and counted, never
// waited for. Before that, a policy from the active snapshot samples
// successful requests and holds errors to a budget.
type accessLog struct {
	ch     chan accessEntry
	policy atomic.Pointer[logPolicy]
	epoch  time.Time // origin of the error budget's clock
	done   chan struct{}

	dropped           prometheus.Counter
	suppressedSampled prometheus.Counter
	suppressedBudget  prometheus.Counter
}

const (
	accessLogQueue = 8192
	redacted       = "[redacted]"
)

// newAccessLog starts the writer; w nil means access logging is off. The
// suppression counter is registered on reg either way.
func newAccessLog(w io.Writer, dropped prometheus.Counter, reg prometheus.Registerer) *accessLog {
	suppressed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rampart_access_log_suppressed_total",
		Help: "Access log lines not written by policy, by reason: sampled (a success not sampled), error_budget (an error or security event over errors_per_second).",
	}, []string{"reason"})
	reg.MustRegister(suppressed)
	if w == nil {
		return nil
	}
	l := &accessLog{ch: make(chan accessEntry, accessLogQueue), dropped: dropped, done: make(chan struct{}),
		epoch:             time.Now(),
		suppressedSampled: suppressed.WithLabelValues("sampled"),
		suppressedBudget:  suppressed.WithLabelValues("error_budget"),
	}
	l.policy.Store(newLogPolicy(snapshot.AccessLog{}, nil))
	go l.run(slog.New(slog.NewJSONHandler(w, nil)))
	return l
}

// logPolicy is one snapshot's access log settings, immutable once built.
type logPolicy struct {
	successRate     float64
	errorsPerSecond int
	budget          *tokenBucket
	headers         []string // canonical names of the request headers logged
	keys            []string // their names in the log: lower case
	redactHeader    []bool   // per header: log "[redacted]" instead of the value
	redactQuery     map[string]struct{}
}

// newLogPolicy builds a policy; the error budget carries over from prev
// when its rate is unchanged, so a snapshot swap grants no new burst.
func newLogPolicy(c snapshot.AccessLog, prev *logPolicy) *logPolicy {
	p := &logPolicy{successRate: 1, errorsPerSecond: c.ErrorsPerSecond}
	if c.SuccessSampleRate != nil {
		p.successRate = *c.SuccessSampleRate
	}
	if p.errorsPerSecond <= 0 {
		p.errorsPerSecond = snapshot.DefaultErrorsPerSecond
	}
	if prev != nil && prev.errorsPerSecond == p.errorsPerSecond {
		p.budget = prev.budget
	} else {
		p.budget = newTokenBucket(p.errorsPerSecond)
	}
	redact := map[string]bool{}
	for _, h := range c.RedactHeaders {
		redact[http.CanonicalHeaderKey(h)] = true
	}
	seen := map[string]bool{}
	for _, h := range c.Headers {
		k := http.CanonicalHeaderKey(h)
		if seen[k] {
			continue
		}
		seen[k] = true
		p.headers = append(p.headers, k)
		p.keys = append(p.keys, strings.ToLower(k))
		p.redactHeader = append(p.redactHeader, redact[k])
	}
	if len(c.RedactQueryParams) > 0 {
		p.redactQuery = make(map[string]struct{}, len(c.RedactQueryParams))
		for _, q := range c.RedactQueryParams {
			p.redactQuery[q] = struct{}{}
		}
	}
	return p
}

// sampleSuccess decides whether a successful request is logged.
func (p *logPolicy) sampleSuccess() bool {
	switch {
	case p.successRate >= 1:
		return true
	case p.successRate <= 0:
		return false
	}
	return rand.Float64() < p.successRate
}

// capture copies the configured header values out of the request (only
// those, and only the strings: the map and its slices are reused).
func (p *logPolicy) capture(r *http.Request) []string {
	out := make([]string, len(p.headers))
	for i, name := range p.headers {
		var v string
		if vv := r.Header[name]; len(vv) == 1 {
			v = vv[0]
		} else if len(vv) > 1 {
			v = strings.Join(vv, ", ")
		} else if name == "Host" {
			v = r.Host
		}
		if v != "" && p.redactHeader[i] {
			v = redacted
		}
		out[i] = v
	}
	return out
}

// configure applies a snapshot's access log settings.
func (l *accessLog) configure(c snapshot.AccessLog) {
	if l == nil {
		return
	}
	l.policy.Store(newLogPolicy(c, l.policy.Load()))
}

// write admits an entry by policy and queues it. It runs on the request
// path, before the handler returns: it is where the request's query and
// headers are read.
func (l *accessLog) write(e *accessEntry) {
	if l == nil {
		return
	}
	pol := l.policy.Load()
	sec := e.security || e.status == http.StatusUnauthorized || e.status == http.StatusForbidden ||
		e.status == http.StatusTooManyRequests
	if sec || e.status >= 400 {
		if !pol.budget.allow(int64(e.start.Add(e.dur).Sub(l.epoch))) {
			l.suppressedBudget.Inc()
			return
		}
	} else if !pol.sampleSuccess() {
		l.suppressedSampled.Inc()
		return
	}
	c := *e
	c.security, c.pol, c.req = sec, pol, nil
	if r := e.req; r != nil {
		if _, q, ok := splitTarget(r); ok {
			c.query = q
		}
		if len(pol.headers) > 0 {
			c.headers = pol.capture(r)
		}
	}
	select {
	case l.ch <- c:
	default:
		l.dropped.Inc()
	}
}

func (l *accessLog) run(log *slog.Logger) {
	defer close(l.done)
	ctx := context.Background()
	var tid [32]byte
	for e := range l.ch {
		attrs := make([]slog.Attr, 0, 20)
		attrs = append(attrs, slog.String("request_id", e.reqID))
		if e.traceID != ([16]byte{}) {
			hex.Encode(tid[:], e.traceID[:])
			attrs = append(attrs, slog.String("trace_id", string(tid[:])))
		}
		attrs = append(attrs,
			slog.String("remote", e.remote),
			slog.String("proto", e.proto),
			slog.String("method", e.method),
			slog.String("host", e.host),
			slog.String("path", e.path),
		)
		if e.query != "" {
			attrs = append(attrs, slog.String("query", redactQuery(e.query, e.pol.redactQuery)))
		}
		attrs = append(attrs,
			slog.Int("status", e.status),
			slog.Int64("bytes", e.bytes),
			slog.Float64("duration_ms", float64(e.dur.Microseconds())/1000),
		)
		if e.route != "" {
			attrs = append(attrs, slog.String("route", e.route), slog.String("revision", e.revision))
		}
		if e.upstream != "" {
			attrs = append(attrs, slog.String("upstream", e.upstream))
		}
		if e.tenant != "" {
			attrs = append(attrs, slog.String("tenant", e.tenant))
		}
		if e.subject != "" {
			attrs = append(attrs, slog.String("subject", e.subject))
		}
		if e.keyID != "" {
			attrs = append(attrs, slog.String("key_id", e.keyID))
		}
		if e.err != "" {
			attrs = append(attrs, slog.String("error", e.err))
		}
		if e.security {
			attrs = append(attrs, slog.Bool("security", true))
		}
		if len(e.headers) > 0 {
			hs := make([]slog.Attr, 0, len(e.headers))
			for i, v := range e.headers {
				if v != "" {
					hs = append(hs, slog.String(e.pol.keys[i], v))
				}
			}
			if len(hs) > 0 {
				attrs = append(attrs, slog.Attr{Key: "headers", Value: slog.GroupValue(hs...)})
			}
		}
		r := slog.NewRecord(e.start, slog.LevelInfo, "access", 0)
		r.AddAttrs(attrs...)
		_ = log.Handler().Handle(ctx, r)
	}
}

// close flushes what is queued and stops the writer.
func (l *accessLog) close() {
	if l == nil {
		return
	}
	close(l.ch)
	<-l.done
}

// tokenBucket is a lock-free rate limit (GCRA): rate per second, with a
// burst of one second's worth.
type tokenBucket struct {
	interval  int64        // ns per token
	tolerance int64        // how far ahead of now tat may run: (burst-1)·interval
	tat       atomic.Int64 // theoretical arrival time of the next token, ns on the caller's clock
}

func newTokenBucket(perSecond int) *tokenBucket {
	iv := int64(time.Second) / int64(perSecond)
	return &tokenBucket{interval: iv, tolerance: iv * int64(perSecond-1)}
}

// allow takes a token at time now (ns, monotonic on the caller's clock).
func (b *tokenBucket) allow(now int64) bool {
	for {
		tat := b.tat.Load()
		next := max(tat, now)
		if next-now > b.tolerance {
			return false
		}
		if b.tat.CompareAndSwap(tat, next+b.interval) {
			return true
		}
	}
}

// redactQuery replaces the values of the named parameters in a raw query
// string with "[redacted]", leaving every other byte as sent. Parameters
// are split on '&' and on ';' (some servers split on it, so a secret after
// one must not slip through), and names are compared after decoding
// percent-escapes and '+' the way a lenient server would. It allocates
// only when it replaces something.
func redactQuery(q string, names map[string]struct{}) string {
	if len(names) == 0 || q == "" {
		return q
	}
	var b []byte // nil until the first replacement
	copied := 0  // q[:copied] is in b
	for i := 0; i <= len(q); {
		end := len(q)
		if j := strings.IndexAny(q[i:], "&;"); j >= 0 {
			end = i + j
		}
		seg := q[i:end]
		if eq := strings.IndexByte(seg, '='); eq >= 0 && queryNameIn(seg[:eq], names) {
			if b == nil {
				b = make([]byte, 0, len(q)+len(redacted))
			}
			b = append(b, q[copied:i+eq+1]...)
			b = append(b, redacted...)
			copied = end
		}
		i = end + 1
	}
	if b == nil {
		return q
	}
	return string(append(b, q[copied:]...))
}

// queryNameIn reports whether a raw parameter name, decoded, is in names.
func queryNameIn(raw string, names map[string]struct{}) bool {
	if _, ok := names[raw]; ok {
		return true
	}
	if !strings.ContainsAny(raw, "%+") {
		return false
	}
	_, ok := names[lenientUnescape(raw)]
	return ok
}

// lenientUnescape decodes %XX escapes and '+' and keeps malformed escapes
// as they are.
func lenientUnescape(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// gatewayTracer makes each request's gateway span (W3C trace context in
// and out, OTLP export); see package telemetry.
type gatewayTracer = telemetry.Tracer

func newGatewayTracer(reg prometheus.Registerer, log *slog.Logger) *gatewayTracer {
	return telemetry.NewTracer(reg, log)
}

// configureTelemetry applies a snapshot's telemetry settings (access log
// policy and tracing); it runs in Apply once the snapshot is active.
func (p *Proxy) configureTelemetry(t snapshot.Telemetry) {
	p.accessLog.configure(t.AccessLog)
	if err := p.tracer.Configure(t.Tracing); err != nil {
		p.errLog.Error("tracing settings not applied; the previous ones stay", "err", err)
	}
}

// shutdownTelemetry flushes spans within ctx (with a short grace if ctx
// has already ended).
func (p *Proxy) shutdownTelemetry(ctx context.Context) {
	if err := p.tracer.Shutdown(ctx); err != nil {
		p.errLog.Warn("tracing: spans not flushed", "err", err)
	}
}

// endSpan ends the request's gateway span with what its access log entry
// says; a span that is not recorded costs nothing here.
func (p *Proxy) endSpan(sp *telemetry.Span, e *accessEntry) {
	if !sp.Recording() {
		return
	}
	host := e.host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	sp.End(&telemetry.Attrs{Method: e.method, Path: e.path, Host: host, Route: e.route, Revision: e.revision,
		Upstream: e.upstream, RequestID: e.reqID, Status: e.status})
}
