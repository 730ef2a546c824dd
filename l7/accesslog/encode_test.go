package accesslog

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// slogLine is how the writer encoded an entry before appendLine: through
// log/slog's JSONHandler. It is the oracle appendLine is held to.
func slogLine(e *Entry) []byte {
	var out bytes.Buffer
	h := slog.NewJSONHandler(&out, nil)
	attrs := []slog.Attr{slog.String("request_id", e.ReqID)}
	if e.TraceID != ([16]byte{}) {
		attrs = append(attrs, slog.String("trace_id", hex.EncodeToString(e.TraceID[:])))
	}
	attrs = append(attrs, slog.String("remote", e.Remote), slog.String("proto", e.Proto),
		slog.String("method", e.Method), slog.String("host", e.Host), slog.String("path", e.Path))
	if e.Query != "" {
		attrs = append(attrs, slog.String("query", redactQuery(e.Query, e.pol.redactQuery)))
	}
	attrs = append(attrs, slog.Int("status", e.Status), slog.Int64("bytes", e.Bytes),
		slog.Float64("duration_ms", float64(e.Dur.Microseconds())/1000))
	if e.Route != "" {
		attrs = append(attrs, slog.String("route", e.Route), slog.String("revision", e.Revision))
	}
	if e.Upstream != "" {
		attrs = append(attrs, slog.String("upstream", e.Upstream))
	}
	if e.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", e.Tenant))
	}
	if e.Subject != "" {
		attrs = append(attrs, slog.String("subject", e.Subject))
	}
	if e.KeyID != "" {
		attrs = append(attrs, slog.String("key_id", e.KeyID))
	}
	if rg := e.Regional; rg.Reason != "" {
		attrs = append(attrs, slog.Group("regional", slog.String("target", rg.Target), slog.String("reason_code", rg.Reason),
			slog.String("policy_version", rg.PolicyVersion.String()), slog.String("region_state_version", rg.StateVersion.String())))
	}
	if e.Err != "" {
		attrs = append(attrs, slog.String("error", e.Err))
	}
	if e.Security {
		attrs = append(attrs, slog.Bool("security", true))
	}
	var hs []slog.Attr
	for i, v := range e.headers {
		if v != "" {
			hs = append(hs, slog.String(e.pol.keys[i], v))
		}
	}
	if len(hs) > 0 {
		attrs = append(attrs, slog.Attr{Key: "headers", Value: slog.GroupValue(hs...)})
	}
	r := slog.NewRecord(e.Start, slog.LevelInfo, "access", 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(context.Background(), r)
	return out.Bytes()
}

func policyWith(headers ...string) *logPolicy {
	return newLogPolicy(snapshot.AccessLog{Headers: headers, RedactQueryParams: []string{"token"}}, nil)
}

func fullEntry() *Entry {
	pol := policyWith("User-Agent", "X-Forwarded-For", "Referer")
	return &Entry{
		Start: time.Date(2026, 12, 3, 9, 41, 22, 123456789, time.UTC), Dur: 1234567 * time.Nanosecond,
		ReqID: "req-1", TraceID: [16]byte{1, 2, 3, 0xab}, Remote: "192.0.2.1:5555", Proto: "HTTP/2.0",
		Method: "GET", Host: "api.example", Path: "/v1/users/42", Query: "a=1&token=secret",
		Route: "users", Revision: "1.7", Upstream: "10.0.0.1:8080", Status: 503, Bytes: 1 << 40,
		Err: "upstream: dial 10.0.0.1:8080: connection refused", Security: true,
		Tenant: "acme", Subject: "user-1", KeyID: "partner-1",
		Regional: Regional{Target: "eu-west", Reason: "fail_over", PolicyVersion: envelope.Version{Epoch: 2, Sequence: 9},
			StateVersion: envelope.Version{Epoch: 1, Sequence: 44}},
		pol: pol, headers: []string{"curl/8.0", "", "https://x.test/?q=\"<a>\""},
	}
}

// appendLine writes the bytes slog wrote, field for field, for entries
// with every field, with none, and with strings that need escaping.
func TestLineMatchesSlog(t *testing.T) {
	empty := &Entry{pol: policyWith()}
	local := fullEntry()
	local.Start = time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.FixedZone("x", -(5*3600+30*60)))
	local.Dur = 0
	odd := fullEntry()
	odd.Path = "/a\"b\\c\n\r\t\x00\x1f\x7f<>&\u2028\u2029é\xff\xc3(日本"
	odd.Host = "\xed\xa0\x80" // a UTF-16 surrogate: invalid UTF-8
	odd.Dur = time.Microsecond
	odd.headers = []string{"", "", ""}
	slow := fullEntry()
	slow.Dur = 90 * 24 * time.Hour
	for name, e := range map[string]*Entry{"full": fullEntry(), "empty": empty, "local zone": local, "escapes": odd, "slow": slow} {
		got, want := appendLine(nil, e), slogLine(e)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
		var m map[string]any
		if err := json.Unmarshal(got, &m); err != nil {
			t.Errorf("%s: not JSON: %v", name, err)
		}
	}
}

// FuzzLine: for any field values, appendLine's bytes are slog's.
func FuzzLine(f *testing.F) {
	f.Add("/v1/x", "a=1&token=2", "api.example", "curl/8", "upstream: reset", int64(1500), 200)
	f.Add("\x00\"\\\u2028\xff", "token", "\xed\xa0\x80", "", "\n", int64(0), 0)
	f.Fuzz(func(t *testing.T, path, query, host, ua, errText string, durUs int64, status int) {
		e := fullEntry()
		e.Path, e.Query, e.Host, e.Err, e.Status = path, query, host, errText, status
		e.headers[0] = ua
		if durUs < 0 {
			durUs = -durUs
		}
		e.Dur = time.Duration(durUs%(1<<50)) * time.Microsecond
		if got, want := appendLine(nil, e), slogLine(e); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

// Lines queued together are written together, whole and in order.
func TestWriterBatchesWholeLines(t *testing.T) {
	var w countingWriter
	l := New(&w, newRegistry())
	for i := range 1000 {
		l.Write(&Entry{ReqID: "r" + strings.Repeat("x", i%7), Status: 200, Start: time.Unix(1, 0)})
	}
	l.Close()
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines)+int(counterValue(l.dropped)) != 1000 {
		t.Fatalf("%d lines + %v dropped, want 1000", len(lines), counterValue(l.dropped))
	}
	for i, ln := range lines {
		if !json.Valid([]byte(ln)) {
			t.Fatalf("line %d is not JSON: %q", i, ln)
		}
	}
	if w.writes > len(lines) || w.writes == 0 {
		t.Fatalf("%d writes for %d lines", w.writes, len(lines))
	}
	t.Logf("%d lines in %d writes", len(lines), w.writes)
}

func BenchmarkLine(b *testing.B) {
	e := fullEntry()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendLine(buf[:0], e)
	}
}

func BenchmarkLineSlog(b *testing.B) {
	e := fullEntry()
	b.ReportAllocs()
	for b.Loop() {
		_ = slogLine(e)
	}
}

type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return w.buf.Write(p) }

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

func counterValue(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

// syncWriter is a writer the test may read while the log writes.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.buf.String() }

// A line is written within a flush interval without Close: the writer
// flushes on its own.
func TestWriterFlushesWithoutClose(t *testing.T) {
	w := &syncWriter{}
	l := New(w, newRegistry())
	defer l.Close()
	l.Write(&Entry{ReqID: "one", Status: 200})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(w.String(), `"request_id":"one"`) {
		if time.Now().After(deadline) {
			t.Fatal("the line was not written within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
