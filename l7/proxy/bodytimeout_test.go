package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// slots are the proxy's own counts of what requests hold.
type slots struct {
	global, route, breaker, pending, connsInUse int64
}

func (l *lab) slots() slots {
	rt := l.p.active.Load()
	s := slots{global: l.p.inflight.Load()}
	for i := range rt.routes {
		s.route += rt.routes[i].stats.inflight.Load()
	}
	for _, cl := range rt.clusters {
		s.breaker += cl.InFlight()
		s.pending += cl.Pending()
		for _, ep := range cl.Endpoints() {
			st := ep.Pool.Stats()
			s.connsInUse += int64(st.Open - st.Idle)
		}
	}
	return s
}

// stallConfig routes POST /up/... to an upstream that answers with the
// length of the body it read, with limits high enough to admit thousands
// of requests at once, and every listener's request_body_timeout_ms set.
func stallConfig(t *testing.T, l *lab, bodyTimeoutMs int, h3 bool) {
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	c := l.config(up.Addr())
	if h3 {
		c.Listeners[0].Protocols = []string{"h2", "http1", "h3"}
	}
	for i := range c.Listeners {
		c.Listeners[i].RequestBodyTimeoutMs = bodyTimeoutMs
	}
	c.Clusters[0].CircuitBreaker = snapshot.Breaker{MaxRequests: 5000, MaxPending: 5000, MaxConnections: 5000}
	// Thousands of upstream dials at once may overflow the test upstream's
	// accept queue on a busy box: a slow connect must neither fail nor
	// eject the only endpoint (which answers the normal requests with 503).
	c.Clusters[0].ConnectTimeoutMs = 30000
	c.Clusters[0].Outlier = snapshot.Outlier{Consecutive5xx: -1, ConsecutiveGatewayErrors: -1}
	c.Clusters[0].MaxIdlePerEndpoint = 64
	c.Routes = []snapshot.Route{
		{ID: "up", Host: "*", Methods: []string{"POST"}, PathTemplate: "/up/{rest...}", UpstreamCluster: "app",
			TimeoutMs: 20000, Idempotency: "none", MaxConcurrentRequests: 5000},
		getRoute("get-only", "/get-only", "app"),
	}
	l.apply(c)
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit: the test
// holds client, proxy and upstream sockets for thousands of requests.
func raiseFileLimit(t *testing.T, need uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if rl.Cur < need {
		rl.Cur = min(rl.Max, need)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatalf("setrlimit nofile %d: %v", need, err)
		}
	}
	if rl.Cur < need {
		t.Fatalf("RLIMIT_NOFILE hard limit %d is under the %d descriptors this test needs", rl.Max, need)
	}
}

// waitFree polls until every slot is back to zero.
func waitFree(t *testing.T, l *lab) slots {
	t.Helper()
	var s slots
	eventually(t, 30*time.Second, "every slot released", func() bool {
		s = l.slots()
		return s == slots{}
	})
	return s
}

// normalPosts sends n complete POSTs and fails the test unless each is
// answered 200 with the body's length.
func normalPosts(t *testing.T, c *http.Client, url string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		resp, err := c.Post(url, "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatalf("normal POST %d during the stall: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "5" {
			t.Fatalf("normal POST %d during the stall: %d %q, want 200 \"5\"", i, resp.StatusCode, b)
		}
	}
}

// 2,000 HTTP/1.1 POSTs that send 3 of 10 body bytes and go silent, each
// admitted and holding an upstream connection: normal requests are still
// served, each stalled one ends as 408 and closes, and every slot is free.
func TestStalledH1BodiesReleaseEverySlot(t *testing.T) {
	const stalled = 2000
	raiseFileLimit(t, 4*stalled+1000)
	l := newLab(t)
	stallConfig(t, l, 2000, false)
	addr := l.addr("http")

	conns := make([]net.Conn, 0, stalled)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	var peak atomic.Int64
	for i := 0; i < stalled; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		if _, err := fmt.Fprintf(c, "POST /up/%d HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", i); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	// Wait until the proxy has every one of them: held upstream, or already
	// timed out (a count, so a slow machine that dials slower than the body
	// timeout passes too), noting the peak held at once.
	eventually(t, 60*time.Second, "every stalled request admitted or timed out", func() bool {
		s := l.slots()
		peak.Store(max(peak.Load(), s.breaker))
		return s.breaker+int64(testutil.ToFloat64(l.p.metrics.listener.BodyTimeouts.WithLabelValues("http1"))) >= stalled
	})
	before := l.slots()
	normalPosts(t, l.h1(), l.url("http", "/up/ok"), 20)

	var got408, other atomic.Int32
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Errorf("stalled request %d: no response: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode == http.StatusRequestTimeout && resp.Close {
				got408.Add(1)
			} else {
				other.Add(1)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("stalled request %d: connection not closed after the 408: %v", i, err)
			}
		}()
	}
	wg.Wait()
	after := waitFree(t, l)
	if got408.Load() != stalled {
		t.Fatalf("%d stalled requests got 408 and a close, %d something else", got408.Load(), other.Load())
	}
	if n := testutil.ToFloat64(l.p.metrics.listener.BodyTimeouts.WithLabelValues("http1")); n != stalled {
		t.Errorf("rampart_request_body_timeouts_total{http1} = %v, want %d", n, stalled)
	}
	if n := testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("up", "app", "408")); n != stalled {
		t.Errorf("rampart_requests_total{up,app,408} = %v, want %d", n, stalled)
	}
	t.Logf("slots while stalled %+v (peak breaker %d); after the timeout %+v", before, peak.Load(), after)
}

// A request refused without reading its body (404, 405) gets its answer
// at once; a body that never comes then closes the connection.
func TestStalledBodyOnRefusedRequestIsAnsweredAndClosed(t *testing.T) {
	l := newLab(t)
	stallConfig(t, l, 500, false)
	for _, tc := range []struct {
		path string
		code int
	}{{"/nowhere", 404}, {"/get-only", 405}} {
		c, err := net.Dial("tcp", l.addr("http"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", tc.path)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: the answer waited for a body that never came: %v", tc.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != tc.code {
			t.Fatalf("%s: %d, want %d", tc.path, resp.StatusCode, tc.code)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: connection not closed after the drain budget: %v", tc.path, err)
		}
	}
	if n := testutil.ToFloat64(l.p.metrics.listener.BodyTimeouts.WithLabelValues("http1")); n != 2 {
		t.Errorf("rampart_request_body_timeouts_total{http1} = %v, want 2", n)
	}
}

// stalledBody sends 3 bytes of a 10-byte body, then nothing until the
// test ends or the client closes it.
type stalledBody struct {
	sent   bool
	stop   chan struct{} // the test's end
	closed chan struct{}
	once   sync.Once
}

func (b *stalledBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "abc"), nil
	}
	select {
	case <-b.stop:
	case <-b.closed:
	}
	return 0, io.ErrUnexpectedEOF
}

func (b *stalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// stallStreams sends n POSTs with stalled bodies through c at once and
// returns how many were answered 408 and how many failed otherwise
// (errors included), once every one has ended.
func stallStreams(t *testing.T, l *lab, c *http.Client, n int) (got408, other int32) {
	t.Helper()
	stop := make(chan struct{})
	defer close(stop)
	var a, b atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", l.url("https", "/up/"+strconv.Itoa(i)), &stalledBody{stop: stop, closed: make(chan struct{})})
			req.ContentLength = 10
			resp, err := c.Do(req)
			if err != nil {
				b.Add(1)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusRequestTimeout {
				a.Add(1)
			} else {
				b.Add(1)
			}
		}()
	}
	eventually(t, 30*time.Second, "stalled streams admitted", func() bool { return l.slots().breaker >= int64(n)/2 })
	var peak slots
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	for sampling := true; sampling; {
		s := l.slots()
		if s.breaker > peak.breaker {
			peak = s
		}
		select {
		case <-ended:
			sampling = false
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Logf("slots at the peak of the stall: %+v", peak)
	return a.Load(), b.Load()
}

// 400 HTTP/2 streams (two connections' worth at 250 streams each) with
// stalled bodies: normal requests on the same client are served, each
// stalled stream is answered 408, and every slot is free.
func TestStalledH2BodiesReleaseEverySlot(t *testing.T) {
	const stalled = 400
	l := newLab(t)
	stallConfig(t, l, 1000, false)
	c := l.h2()
	c.Timeout = 60 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		eventually(t, 30*time.Second, "stall under way", func() bool { return l.slots().breaker >= stalled/2 })
		normalPosts(t, c, l.url("https", "/up/ok"), 20)
	}()
	got408, other := stallStreams(t, l, c, stalled)
	<-done
	after := waitFree(t, l)
	if got408 != stalled {
		t.Fatalf("%d stalled streams got 408, %d something else", got408, other)
	}
	if n := testutil.ToFloat64(l.p.metrics.listener.BodyTimeouts.WithLabelValues("h2")); n != stalled {
		t.Errorf("rampart_request_body_timeouts_total{h2} = %v, want %d", n, stalled)
	}
	t.Logf("after the timeout: %+v", after)
}

// The same over HTTP/3: each stalled stream ends (408, or a reset after
// STOP_SENDING) and every slot is free.
func TestStalledH3BodiesReleaseEverySlot(t *testing.T) {
	const stalled = 100
	l := newLab(t)
	stallConfig(t, l, 1000, true)
	c := l.h3Client()
	c.Timeout = 60 * time.Second
	got408, other := stallStreams(t, l, c, stalled)
	after := waitFree(t, l)
	if got408+other != stalled || got408 == 0 {
		t.Fatalf("%d stalled streams got 408, %d ended otherwise", got408, other)
	}
	if n := testutil.ToFloat64(l.p.metrics.listener.BodyTimeouts.WithLabelValues("h3")); n != stalled {
		t.Errorf("rampart_request_body_timeouts_total{h3} = %v, want %d", n, stalled)
	}
	normalPosts(t, c, l.url("https", "/up/ok"), 5)
	t.Logf("%d answered 408, %d reset; after the timeout: %+v", got408, other, after)
}
