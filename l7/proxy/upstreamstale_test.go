package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/upstream"
)

// The pools' stale-connection counts appear on /metrics, one series per
// reason, with the values upstream reports.
func TestUpstreamStaleMetric(t *testing.T) {
	p := New(Options{})
	want := upstream.TotalStale()
	got := staleSeries(t, p)
	if len(got) != len(upstream.StaleReasons) {
		t.Fatalf("series %v, want one per reason %v", got, upstream.StaleReasons)
	}
	for _, r := range upstream.StaleReasons {
		if v, ok := got[r.String()]; !ok || v < float64(want[r]) {
			t.Errorf("reason %s = %v (present %v), want at least %d", r, v, ok, want[r])
		}
	}
}

func staleSeries(t *testing.T, p *Proxy) map[string]float64 {
	t.Helper()
	fams, err := p.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "rampart_upstream_stale_connections_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return got
}

// scriptedUpstream is an HTTP/1.1 server on loopback that answers request
// req of connection conn (both from 1) with the body "c<conn>r<req>",
// unless answer says no (then it closes the connection instead); after
// runs once the answer is written.
type scriptedUpstream struct {
	ln     net.Listener
	answer func(conn, req int) bool
	after  func(c *net.TCPConn, conn, req int)
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func newScriptedUpstream(t *testing.T, answer func(conn, req int) bool, after func(c *net.TCPConn, conn, req int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &scriptedUpstream{ln: ln, answer: answer, after: after}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go u.serve(c.(*net.TCPConn), n)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return ln.Addr().String()
}

func (u *scriptedUpstream) serve(c *net.TCPConn, conn int) {
	defer u.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for req := 1; ; req++ {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		if u.answer != nil && !u.answer(conn, req) {
			return
		}
		body := fmt.Sprintf("c%dr%d", conn, req)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
		if u.after != nil {
			u.after(c, conn, req)
		}
	}
}

// acked waits until the peer has acknowledged every byte written on c, so
// they sit in the peer's receive queue.
func acked(c *net.TCPConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var unacked int
		var ierr error
		if err := raw.Control(func(fd uintptr) { unacked, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
			return err
		}
		if ierr != nil {
			return ierr
		}
		if unacked == 0 {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("bytes still unacknowledged after 30 s")
}

// An upstream that sends an unsolicited response on a keep-alive
// connection after a complete one: the next client gets its own response
// from a fresh connection, never the stray one, and the stray is counted.
func TestUnsolicitedUpstreamResponseIsNotServedToTheNextClient(t *testing.T) {
	l := newLab(t)
	strayed := make(chan error, 1)
	addr := newScriptedUpstream(t, nil, func(c *net.TCPConn, conn, req int) {
		if conn == 1 && req == 1 { // a second answer nobody asked for
			_, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
			if err == nil {
				err = acked(c)
			}
			strayed <- err
		}
	})
	singleRoute(l, addr, func(r *snapshot.Route) { r.Methods = []string{"GET"}; r.RequestClass = "read"; r.Idempotency = "safe" })
	before := upstream.TotalStale()[upstream.StaleUnsolicited]
	if code, body, _ := get(t, http.DefaultClient, l.url("http", "/x")); code != 200 || body != "c1r1" {
		t.Fatalf("first: %d %q, want 200 c1r1", code, body)
	}
	if err := <-strayed; err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"c2r1", "c2r2"} {
		if code, body, _ := get(t, http.DefaultClient, l.url("http", "/x")); code != 200 || body != want {
			t.Fatalf("request %d after the stray response: %d %q, want 200 %s", i+2, code, body, want)
		}
	}
	if got := upstream.TotalStale()[upstream.StaleUnsolicited] - before; got < 1 {
		t.Fatalf("unsolicited stale connections grew by %d, want at least 1", got)
	}
	if v := staleSeries(t, l.p)["unsolicited"]; v < float64(before+1) {
		t.Fatalf("rampart_upstream_stale_connections_total{reason=unsolicited} = %v, want > %d", v, before)
	}
	if n := testutil.ToFloat64(l.p.metrics.upstreamTries.WithLabelValues("app", "stale_connection")); n != 0 {
		t.Fatalf("%v stale_connection replays: the desynced connection was used", n)
	}
}

// The pools' connection totals appear on /metrics with the values upstream
// reports.
func TestUpstreamConnectionMetrics(t *testing.T) {
	p := New(Options{})
	fams, err := p.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	tot := upstream.TotalCounts()
	want := map[string]uint64{
		"rampart_upstream_connections_opened_total":   tot.Dials,
		"rampart_upstream_connections_reused_total":   tot.Reuses,
		"rampart_upstream_connections_expired_total":  tot.Expired,
		"rampart_upstream_connections_not_kept_total": tot.NotKept,
	}
	for _, f := range fams {
		if w, ok := want[f.GetName()]; ok {
			if v := f.GetMetric()[0].GetCounter().GetValue(); v < float64(w) {
				t.Errorf("%s = %v, want at least %d", f.GetName(), v, w)
			}
			delete(want, f.GetName())
		}
	}
	if len(want) > 0 {
		t.Errorf("missing series %v", want)
	}
}
