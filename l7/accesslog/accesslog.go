package accesslog

import (
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Entry is one request's log line, filled on the request path and
// encoded on the log writer's goroutine. Its fields are the line's fields
// (an empty string or zero is left out where noted in Log.run).
type Entry struct {
	Start    time.Time
	Dur      time.Duration
	ReqID    string
	TraceID  [16]byte // the gateway span's trace id; zero: none
	Remote   string
	Proto    string
	Method   string
	Host     string
	Path     string
	Query    string // raw query as sent; redacted by policy when encoded
	Route    string
	Revision string
	Upstream string
	Status   int
	Bytes    int64
	Err      string
	// Security marks a shed, deny or authentication failure: logged like
	// an error (within the error budget) and flagged "security":true.
	// Statuses 401, 403 and 429 count as security events by themselves.
	Security bool

	// The verified identity, when the route authenticates.
	Tenant  string
	Subject string
	KeyID   string

	// Regional is the regional decision of a route with a platform
	// (Reason "" : none was taken).
	Regional Regional

	// Req is the request, read by Write while the handler still owns it
	// (for the configured headers) and never queued: the HTTP/1.1 server
	// reuses the request and its header map afterwards.
	Req *http.Request

	// Filled by Write for the writer goroutine.
	headers []string   // values of pol.headers, in order; "" when absent
	pol     *logPolicy // the policy the entry was admitted under
}

// Regional is what the regional stage decided: the target region (or
// "503"), the reason code, the snapshot version the policy came from and
// the region-state version it decided under (0.0: none).
type Regional struct {
	Target        string
	Reason        string
	PolicyVersion envelope.Version
	StateVersion  envelope.Version
}

// Log hands entries to a writer goroutine through a bounded queue; when
// the writer falls behind, entries are dropped and counted, never waited
// for. Before that, a policy from the active snapshot samples successful
// requests and holds errors to a budget. A nil *Log is a log that is off.
type Log struct {
	ch     chan Entry
	wake   chan struct{} // cap 1: the queue is half full, or closed
	policy atomic.Pointer[logPolicy]
	epoch  time.Time // origin of the error budget's clock
	done   chan struct{}

	dropped           prometheus.Counter
	suppressedSampled prometheus.Counter
	suppressedBudget  prometheus.Counter
}

const (
	queueLen   = 8192
	batchBytes = 32 << 10
	flushEvery = 100 * time.Millisecond
	redacted   = "[redacted]"
)

// New starts the writer; w nil means access logging is off (New returns
// nil). rampart_access_log_dropped_total and
// rampart_access_log_suppressed_total are registered on reg either way.
func New(w io.Writer, reg prometheus.Registerer) *Log {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rampart_access_log_dropped_total", Help: "Access log lines dropped because the log writer fell behind.",
	})
	suppressed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rampart_access_log_suppressed_total",
		Help: "Access log lines not written by policy, by reason: sampled (a success not sampled), error_budget (an error or security event over errors_per_second).",
	}, []string{"reason"})
	reg.MustRegister(dropped, suppressed)
	if w == nil {
		return nil
	}
	l := &Log{ch: make(chan Entry, queueLen), wake: make(chan struct{}, 1), dropped: dropped, done: make(chan struct{}),
		epoch:             time.Now(),
		suppressedSampled: suppressed.WithLabelValues("sampled"),
		suppressedBudget:  suppressed.WithLabelValues("error_budget"),
	}
	l.policy.Store(newLogPolicy(snapshot.AccessLog{}, nil))
	go l.run(w)
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

// Configure applies a snapshot's access log settings.
func (l *Log) Configure(c snapshot.AccessLog) {
	if l == nil {
		return
	}
	l.policy.Store(newLogPolicy(c, l.policy.Load()))
}

// Write admits an entry by policy and queues it. It runs on the request
// path, before the handler returns: it is where the request's headers are
// read.
func (l *Log) Write(e *Entry) {
	if l == nil {
		return
	}
	pol := l.policy.Load()
	sec := e.Security || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden ||
		e.Status == http.StatusTooManyRequests
	if sec || e.Status >= 400 {
		if !pol.budget.allow(int64(e.Start.Add(e.Dur).Sub(l.epoch))) {
			l.suppressedBudget.Inc()
			return
		}
	} else if !pol.sampleSuccess() {
		l.suppressedSampled.Inc()
		return
	}
	c := *e
	c.Security, c.pol, c.Req = sec, pol, nil
	if r := e.Req; r != nil && len(pol.headers) > 0 {
		c.headers = pol.capture(r)
	}
	select {
	case l.ch <- c:
		if len(l.ch) >= queueLen/2 {
			l.poke()
		}
	default:
		l.dropped.Inc()
	}
}

// poke wakes the writer before its next tick.
func (l *Log) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run writes the queued lines every flushEvery, or sooner when the queue
// is half full, in writes of up to batchBytes. The request path then never
// wakes a goroutine or makes a write(2) of its own: a line per request
// written at once cost a wake-up and a syscall each (~3 µs of CPU per
// request in BenchmarkChain), like nginx's access_log without buffer=.
func (l *Log) run(w io.Writer) {
	defer close(l.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	buf := make([]byte, 0, batchBytes+4096)
	for {
		select {
		case <-tick.C:
		case <-l.wake:
		}
		for {
			select {
			case e, ok := <-l.ch:
				if !ok {
					if len(buf) > 0 {
						_, _ = w.Write(buf)
					}
					return
				}
				buf = appendLine(buf, &e)
				if len(buf) < batchBytes {
					continue
				}
			default:
			}
			if len(buf) > 0 {
				_, _ = w.Write(buf) // nowhere to report it: the log is where errors go
				buf = buf[:0]
			}
			if len(l.ch) == 0 {
				break
			}
		}
	}
}

// Close flushes what is queued and stops the writer.
func (l *Log) Close() {
	if l == nil {
		return
	}
	close(l.ch)
	l.poke()
	<-l.done
}
