package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/telemetry/otlptest"
)

// telLogLab is a lab whose proxy writes its access log to the returned buffer.
func telLogLab(t *testing.T) (*lab, *logSink) {
	t.Helper()
	l := newLab(t)
	_ = l.p.Shutdown(context.Background()) // the lab's own proxy, never used
	buf := &logSink{}
	l.p = New(Options{AccessLog: buf, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return l, buf
}

// telStop shuts the proxy down, which flushes the access log and spans.
func telStop(t *testing.T, l *lab) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.p.Shutdown(ctx)
}

// telLogLines decodes the access log, one map per line.
func telLogLines(t *testing.T, buf *logSink) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("access log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// telClient is a keep-alive HTTP/1.1 client for the lab's http listener.
func telClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func telGet(t *testing.T, c *http.Client, url string, hdr map[string]string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// telUpstream answers /s/{code} with that status.
func telUpstream(t *testing.T) *testUpstream {
	return startUpstream(t, "status", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/s/"))
		if err != nil {
			code = 200
		}
		w.WriteHeader(code)
	})
}

func telConfig(l *lab, up *testUpstream, tel snapshot.Telemetry) *snapshot.Config {
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("status", "/s/{code}", "app")}
	c.Telemetry = tel
	return c
}

func telRatio(v float64) *float64 { return &v }

// telTraceparent checks a version-00 traceparent and returns its parts.
func telTraceparent(t *testing.T, v string) (traceID, spanID, flags string) {
	t.Helper()
	p := strings.Split(v, "-")
	if len(p) != 4 || p[0] != "00" || len(p[1]) != 32 || len(p[2]) != 16 || len(p[3]) != 2 ||
		p[1] == strings.Repeat("0", 32) || p[2] == strings.Repeat("0", 16) || strings.ToLower(v) != v {
		t.Fatalf("not a valid traceparent: %q", v)
	}
	return p[1], p[2], p[3]
}

const (
	telInTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	telInSpan  = "00f067aa0ba902b7"
)

func TestTraceparentContinuedUpstream(t *testing.T) {
	l := newLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{}))
	for _, c := range []struct {
		name     string
		client   *http.Client
		url      string
		incoming string
	}{
		{"h1 sampled", telClient(t), l.url("http", "/s/200"), "00-" + telInTrace + "-" + telInSpan + "-01"},
		{"h1 not sampled", telClient(t), l.url("http", "/s/200"), "00-" + telInTrace + "-" + telInSpan + "-00"},
		{"h2 sampled", l.h2(), l.url("https", "/s/200"), "00-" + telInTrace + "-" + telInSpan + "-01"},
	} {
		if code := telGet(t, c.client, c.url, map[string]string{"Traceparent": c.incoming, "Tracestate": "v=1"}); code != 200 {
			t.Fatalf("%s: status %d", c.name, code)
		}
		got := up.Last().Header
		tid, sid, flags := telTraceparent(t, got.Get("Traceparent"))
		if tid != telInTrace {
			t.Errorf("%s: upstream trace id %s, want the incoming %s", c.name, tid, telInTrace)
		}
		if sid == telInSpan {
			t.Errorf("%s: upstream parent span id is the client's; want the gateway span's", c.name)
		}
		if flags != c.incoming[len(c.incoming)-2:] {
			t.Errorf("%s: flags %s, want the incoming sampling decision %s", c.name, flags, c.incoming[len(c.incoming)-2:])
		}
		if got.Get("Tracestate") != "v=1" || len(got["Traceparent"]) != 1 {
			t.Errorf("%s: upstream got traceparent %q tracestate %q", c.name, got["Traceparent"], got["Tracestate"])
		}
	}
}

func TestTraceparentStartedWhenAbsent(t *testing.T) {
	l := newLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{}))
	c := telClient(t)
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		hdr := map[string]string{}
		if i == 2 {
			hdr["Traceparent"] = "00-garbage" // invalid: a new trace
		}
		if code := telGet(t, c, l.url("http", "/s/200"), hdr); code != 200 {
			t.Fatalf("status %d", code)
		}
		tid, _, _ := telTraceparent(t, up.Last().Header.Get("Traceparent"))
		if seen[tid] {
			t.Fatalf("trace id %s reused", tid)
		}
		seen[tid] = true
	}
}

func TestTraceSpansExported(t *testing.T) {
	col := otlptest.Start(t)
	l := newLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{Tracing: snapshot.Tracing{OTLPEndpoint: col.URL, SampleRatio: telRatio(1), ServiceName: "edge"}}))
	c := telClient(t)
	sent := map[string]string{} // trace id → the gateway span id the upstream saw
	for _, code := range []int{200, 201, 503} {
		if got := telGet(t, c, l.url("http", "/s/"+strconv.Itoa(code)), nil); got != code {
			t.Fatalf("status %d, want %d", got, code)
		}
		tid, sid, flags := telTraceparent(t, up.Last().Header.Get("Traceparent"))
		if flags != "01" {
			t.Fatalf("flags %s at ratio 1", flags)
		}
		sent[tid] = sid
	}
	telStop(t, l) // flushes
	spans := col.Spans()
	if len(spans) != len(sent) {
		t.Fatalf("collector got %d spans, want %d: %+v", len(spans), len(sent), spans)
	}
	for _, s := range spans {
		if sent[s.TraceID] != s.SpanID {
			t.Errorf("exported span %s/%s is not the one the upstream saw as parent", s.TraceID, s.SpanID)
		}
		if s.Attrs["http.route"] != "status" || s.Attrs["rampart.revision"] != "app" || s.Attrs["http.request.method"] != "GET" ||
			!strings.HasPrefix(s.Attrs["url.path"], "/s/") || s.Attrs["rampart.upstream"] != up.Addr() ||
			s.Attrs["server.address"] != "127.0.0.1" || s.Attrs["http.response.status_code"] != strings.TrimPrefix(s.Attrs["url.path"], "/s/") ||
			s.Service != "edge" {
			t.Errorf("span attributes: %+v", s)
		}
	}
	if p := col.Problems(); len(p) > 0 {
		t.Errorf("collector problems: %v", p)
	}
}

func TestTraceRatioZeroExportsNothing(t *testing.T) {
	col := otlptest.Start(t)
	l := newLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{Tracing: snapshot.Tracing{OTLPEndpoint: col.URL, SampleRatio: telRatio(0)}}))
	c := telClient(t)
	for i := 0; i < 50; i++ {
		telGet(t, c, l.url("http", "/s/200"), nil)
		if _, _, flags := telTraceparent(t, up.Last().Header.Get("Traceparent")); flags != "00" {
			t.Fatalf("flags %s at ratio 0", flags)
		}
	}
	telStop(t, l)
	if n, s := col.Requests(), col.Spans(); n != 0 || len(s) != 0 {
		t.Fatalf("at ratio 0 the collector got %d requests, %d spans", n, len(s))
	}
}

// Requests finish while the collector accepts connections and never
// answers: export runs off the request path and drops when its queue is
// full. (No speed is asserted, only that the requests complete.)
func TestTraceHungCollectorDoesNotHoldRequests(t *testing.T) {
	l := newLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{Tracing: snapshot.Tracing{OTLPEndpoint: otlptest.Blackhole(t), SampleRatio: telRatio(1)}}))
	c := telClient(t)
	c.Timeout = 30 * time.Second // liveness: a stalled box, not a hung export, may slow one request
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 1200; i++ { // more than a batch (512): exports start and hang meanwhile
			resp, err := c.Get(l.url("http", "/s/200"))
			if err != nil {
				done <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				done <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("requests did not complete while the collector hung")
	}
	// Shutdown gives up flushing when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = l.p.Shutdown(ctx)
}

func TestTracingReconfiguredOnSwap(t *testing.T) {
	a, b := otlptest.Start(t), otlptest.Start(t)
	l := newLab(t)
	up := telUpstream(t)
	c := telClient(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{Tracing: snapshot.Tracing{OTLPEndpoint: a.URL, SampleRatio: telRatio(1)}}))
	telGet(t, c, l.url("http", "/s/200"), nil)
	l.apply(telConfig(l, up, snapshot.Telemetry{Tracing: snapshot.Tracing{OTLPEndpoint: b.URL, SampleRatio: telRatio(1)}}))
	telGet(t, c, l.url("http", "/s/200"), nil)
	telGet(t, c, l.url("http", "/s/200"), nil)
	l.apply(telConfig(l, up, snapshot.Telemetry{})) // no export: traceparent still passed on
	telGet(t, c, l.url("http", "/s/200"), nil)
	telTraceparent(t, up.Last().Header.Get("Traceparent"))
	telStop(t, l)
	if na, nb := len(a.Spans()), len(b.Spans()); na != 1 || nb != 2 {
		t.Fatalf("first collector got %d spans, second %d; want 1 and 2", na, nb)
	}
}

func TestAccessLogSamplesSuccesses(t *testing.T) {
	l, buf := telLogLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{AccessLog: snapshot.AccessLog{SuccessSampleRate: telRatio(0.1)}}))
	c := telClient(t)
	const n, p = 1000, 0.1
	for i := 0; i < n; i++ {
		if code := telGet(t, c, l.url("http", "/s/200"), nil); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	suppressed := metricValue(t, l.p.metrics.Registry, "rampart_access_log_suppressed_total", "reason", "sampled")
	telStop(t, l)
	logged := len(telLogLines(t, buf))
	if sd := math.Sqrt(n * p * (1 - p)); math.Abs(float64(logged)-n*p) > 6*sd {
		t.Fatalf("%d of %d successes logged at success_sample_rate %v", logged, n, p)
	}
	if int(suppressed) != n-logged {
		t.Fatalf("rampart_access_log_suppressed_total{reason=sampled} = %v, want %d", suppressed, n-logged)
	}
	if got := metricValue(t, l.p.metrics.Registry, "rampart_access_log_suppressed_total", "reason", "error_budget"); got != 0 {
		t.Fatalf("error_budget suppressions %v with no errors", got)
	}
}

func TestAccessLogErrorBudget(t *testing.T) {
	l, buf := telLogLab(t)
	up := telUpstream(t)
	const perSecond = 5
	l.apply(telConfig(l, up, snapshot.Telemetry{AccessLog: snapshot.AccessLog{SuccessSampleRate: telRatio(0), ErrorsPerSecond: perSecond}}))
	c := telClient(t)
	codes := []int{500, 401, 429, 404, 503, 403}
	const n = 60
	begin := time.Now()
	for i := 0; i < n; i++ {
		code := codes[i%len(codes)]
		path := "/s/" + strconv.Itoa(code)
		if code == 404 {
			path = "/nowhere" // unmatched: answered by the proxy itself
		}
		if got := telGet(t, c, l.url("http", path), map[string]string{"X-Request-Id": "req-" + strconv.Itoa(i)}); got != code {
			t.Fatalf("status %d, want %d", got, code)
		}
	}
	telGet(t, c, l.url("http", "/s/200"), nil) // a success at rate 0: sampled out
	elapsed := time.Since(begin)
	budgetSuppressed := metricValue(t, l.p.metrics.Registry, "rampart_access_log_suppressed_total", "reason", "error_budget")
	telStop(t, l)
	lines := telLogLines(t, buf)
	// A burst of one second's worth, then perSecond more per second.
	most := perSecond + int(math.Ceil(elapsed.Seconds()*perSecond)) + 1
	if len(lines) < perSecond || len(lines) > most {
		t.Fatalf("%d error lines logged in %v at errors_per_second %d (want %d..%d)", len(lines), elapsed, perSecond, perSecond, most)
	}
	if int(budgetSuppressed) != n-len(lines) {
		t.Fatalf("rampart_access_log_suppressed_total{reason=error_budget} = %v, want %d", budgetSuppressed, n-len(lines))
	}
	for _, m := range lines {
		st := int(m["status"].(float64))
		wantSec := st == 401 || st == 403 || st == 429
		if sec, _ := m["security"].(bool); sec != wantSec {
			t.Errorf("status %d logged with security=%v", st, m["security"])
		}
	}
	// The counter is on the proxy's registry, with both reasons.
	if n, err := testutil.GatherAndCount(l.p.metrics.Registry, "rampart_access_log_suppressed_total"); err != nil || n != 2 {
		t.Fatalf("rampart_access_log_suppressed_total series: %d, %v", n, err)
	}
}

func TestAccessLogRedactsAndCarriesTraceID(t *testing.T) {
	l, buf := telLogLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{AccessLog: snapshot.AccessLog{
		Headers:           []string{"user-agent", "Authorization", "X-Api-Key", "X-Absent"},
		RedactHeaders:     []string{"authorization", "X-API-KEY"},
		RedactQueryParams: []string{"token", "api_key"},
	}}))
	c := telClient(t)
	telGet(t, c, l.url("http", "/s/200?user=bob&token=s3cret&api%5Fkey=k3y;token=again&x=1"), map[string]string{
		"User-Agent": "tester/1", "Authorization": "Bearer hunter2", "X-Api-Key": "abc123"})
	upstreamTrace, _, _ := telTraceparent(t, up.Last().Header.Get("Traceparent"))
	telStop(t, l)
	out := buf.String()
	for _, secret := range []string{"s3cret", "k3y", "again", "hunter2", "abc123"} {
		if strings.Contains(out, secret) {
			t.Errorf("access log shows %q: %s", secret, out)
		}
	}
	lines := telLogLines(t, buf)
	if len(lines) != 1 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	m := lines[0]
	if q := m["query"]; q != "user=bob&token=[redacted]&api%5Fkey=[redacted];token=[redacted]&x=1" {
		t.Errorf("query %q", q)
	}
	hs, _ := m["headers"].(map[string]any)
	if hs["user-agent"] != "tester/1" || hs["authorization"] != "[redacted]" || hs["x-api-key"] != "[redacted]" || len(hs) != 3 {
		t.Errorf("headers %v", m["headers"])
	}
	if m["trace_id"] != upstreamTrace {
		t.Errorf("trace_id %v, the upstream saw trace %s", m["trace_id"], upstreamTrace)
	}
	if _, ok := m["security"]; ok {
		t.Errorf("a 200 marked as a security event")
	}
}

// The HTTP/1.1 server reuses a connection's request and header map: the
// values logged must be the ones of their own request.
func TestAccessLogHeadersCopiedBeforeReuse(t *testing.T) {
	l, buf := telLogLab(t)
	up := telUpstream(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{AccessLog: snapshot.AccessLog{Headers: []string{"X-Tag"}}}))
	conn, err := net.Dial("tcp", l.addr("http"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 200
	go func() { // pipelined on one connection
		bw := bufio.NewWriter(conn)
		for i := 0; i < n; i++ {
			fmt.Fprintf(bw, "GET /s/200 HTTP/1.1\r\nHost: x\r\nX-Request-Id: req-%d\r\nX-Tag: tag-%d\r\n\r\n", i, i)
		}
		_ = bw.Flush()
	}()
	br := bufio.NewReader(conn)
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	telStop(t, l)
	lines := telLogLines(t, buf)
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for _, m := range lines {
		id, _ := m["request_id"].(string)
		hs, _ := m["headers"].(map[string]any)
		if want := "tag-" + strings.TrimPrefix(id, "req-"); hs["x-tag"] != want {
			t.Fatalf("request %s logged x-tag %v, want %s", id, hs["x-tag"], want)
		}
	}
}

func TestAccessLogPolicyFollowsSwap(t *testing.T) {
	l, buf := telLogLab(t)
	up := telUpstream(t)
	c := telClient(t)
	l.apply(telConfig(l, up, snapshot.Telemetry{})) // defaults: every success logged
	for i := 0; i < 10; i++ {
		telGet(t, c, l.url("http", "/s/200"), nil)
	}
	l.apply(telConfig(l, up, snapshot.Telemetry{AccessLog: snapshot.AccessLog{SuccessSampleRate: telRatio(0)}}))
	for i := 0; i < 10; i++ {
		telGet(t, c, l.url("http", "/s/200"), nil)
	}
	telStop(t, l)
	if n := len(telLogLines(t, buf)); n != 10 {
		t.Fatalf("%d lines, want the 10 before the swap", n)
	}
}
