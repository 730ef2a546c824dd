package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// desyncBackend is an HTTP/1.1 server on loopback that answers each request
// with "c<conn>r<request>" and, after the first response of its first
// connection, misbehaves with after (writes stray bytes, closes, ...):
// at once, or once kick is closed.
type desyncBackend struct {
	ln    net.Listener
	after func(c net.Conn)
	kick  chan struct{} // nil: misbehave right behind the response
	wg    sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

func newDesyncBackend(t *testing.T, after func(c net.Conn), kick chan struct{}) *desyncBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &desyncBackend{ln: ln, after: after, kick: kick}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(func() {
		ln.Close()
		if kick != nil {
			select {
			case <-kick:
			default:
				close(kick)
			}
		}
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *desyncBackend) accept() {
	defer b.wg.Done()
	for n := 1; ; n++ {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c, n)
	}
}

func (b *desyncBackend) serve(c net.Conn, conn int) {
	defer b.wg.Done()
	br := bufio.NewReader(c)
	for req := 1; ; req++ {
		for { // the request head, up to its empty line
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		body := fmt.Sprintf("c%dr%d", conn, req)
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
			return
		}
		if conn == 1 && req == 1 && b.after != nil {
			if b.kick != nil {
				<-b.kick
			}
			b.after(c)
		}
	}
}

// get sends one GET through the pool and returns the response body and
// whether the connection was a reused one.
func get(t *testing.T, p *Pool) (string, bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a liveness bound
	c, err := p.Get(context.Background(), deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	reused := c.Reused
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c.Writer(), "GET / HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.Writer().Flush(); err != nil {
		t.Fatal(err)
	}
	rh, err := ReadResponseHead(c.Reader(), http.Header{}, 8192)
	if err != nil {
		c.Close()
		t.Fatalf("response head (reused %v): %v", reused, err)
	}
	b, err := io.ReadAll(c.Body("GET", rh, nil))
	if err != nil {
		c.Close()
		t.Fatalf("response body (reused %v): %v", reused, err)
	}
	c.Release(!rh.Close)
	return string(b), reused
}

// waitReadable polls, with poll(2) and not with the pool's own probe, until
// the pool's only idle connection has something to read (bytes or an end).
func waitReadable(t *testing.T, p *Pool) {
	t.Helper()
	p.mu.Lock()
	if len(p.idle) != 1 {
		p.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(p.idle))
	}
	raw := p.idle[0].probe.raw
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second) // a liveness bound
	for {
		var ready bool
		err := raw.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
			n, err := unix.Poll(fds, 0)
			ready = err == nil && n == 1 && fds[0].Revents != 0
		})
		if err != nil {
			t.Fatal(err)
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle connection never became readable")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A connection that is readable while idle (a stray response, stray bytes,
// the server's close) is never reused: the next request gets its own
// answer on a new connection, and the pool counts why.
func TestIdleConnectionNotSilentIsNotReused(t *testing.T) {
	cases := []struct {
		name  string
		after func(c net.Conn)
		want  StaleReason
	}{
		{"extra full response", func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
		}, StaleUnsolicited},
		{"garbage bytes", func(c net.Conn) { _, _ = io.WriteString(c, "xyz") }, StaleUnsolicited},
		{"closed while idle", func(c net.Conn) { _ = c.(*net.TCPConn).CloseWrite() }, StaleEOF},
		{"reset while idle", func(c net.Conn) {
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
		}, StaleReset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kick := make(chan struct{})
			b := newDesyncBackend(t, tc.after, kick)
			p := NewPool(b.ln.Addr().String(), PoolConfig{})
			defer p.Close()
			before := TotalStale()

			if body, reused := get(t, p); body != "c1r1" || reused {
				t.Fatalf("first response %q (reused %v), want c1r1 on a new connection", body, reused)
			}
			close(kick) // the connection is idle in the pool now
			waitReadable(t, p)
			if body, reused := get(t, p); body != "c2r1" || reused {
				t.Fatalf("second response %q (reused %v), want c2r1 on a new connection", body, reused)
			}
			if body, reused := get(t, p); body != "c2r2" || !reused {
				t.Fatalf("third response %q (reused %v), want c2r2 on the reused connection", body, reused)
			}
			st := p.Stats()
			var want StaleCounts
			want[tc.want] = 1
			if st.Stale != want || st.Dials != 2 || st.Reuses != 1 || st.Open != 1 {
				t.Fatalf("stats %+v: want stale %v (%s), 2 dials, 1 reuse, 1 open", st, want, tc.want)
			}
			if after := TotalStale(); after[tc.want]-before[tc.want] < 1 {
				t.Fatalf("process-wide %s count %d -> %d, want it to grow", tc.want, before[tc.want], after[tc.want])
			}
		})
	}
}

// A silent idle connection is reused, and probing it consumes nothing.
func TestSilentIdleConnectionIsReused(t *testing.T) {
	b := newDesyncBackend(t, nil, nil)
	p := NewPool(b.ln.Addr().String(), PoolConfig{})
	defer p.Close()
	for i := 1; i <= 3; i++ {
		body, reused := get(t, p)
		if want := fmt.Sprintf("c1r%d", i); body != want || reused != (i > 1) {
			t.Fatalf("response %d: %q (reused %v), want %s", i, body, reused, want)
		}
	}
	if st := p.Stats(); st.Stale != (StaleCounts{}) || st.Dials != 1 || st.Reuses != 2 {
		t.Fatalf("stats %+v: want 1 dial, 2 reuses, nothing stale", st)
	}
}

// At a cluster's connection limit, a desynced idle connection is closed
// (freeing its slot for a new one), not reused.
func TestDesyncedConnectionAtTheLimitIsReplaced(t *testing.T) {
	kick := make(chan struct{})
	b := newDesyncBackend(t, func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") }, kick)
	l := NewLimiter(1, 1)
	p := NewPool(b.ln.Addr().String(), PoolConfig{Limiter: l})
	defer p.Close()
	if body, _ := get(t, p); body != "c1r1" {
		t.Fatalf("first response %q", body)
	}
	close(kick)
	waitReadable(t, p)
	// The only slot is held by the idle, desynced connection: the next Get
	// must close it (not reuse it) and dial.
	if body, reused := get(t, p); body != "c2r1" || reused {
		t.Fatalf("second response %q (reused %v), want c2r1 on a new connection", body, reused)
	}
	if st := p.Stats(); st.Stale[StaleUnsolicited] != 1 || l.Open() != 1 {
		t.Fatalf("stats %+v, limiter open %d: want 1 unsolicited, 1 open", st, l.Open())
	}
}

// Stray bytes that arrive with the response (read into the buffer with
// it) make Release close the connection instead of pooling it; they are
// counted as unsolicited too.
func TestStrayBytesBehindTheResponseAreNotPooled(t *testing.T) {
	b := newDesyncBackend(t, func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray") }, nil)
	p := NewPool(b.ln.Addr().String(), PoolConfig{})
	defer p.Close()
	deadline := time.Now().Add(30 * time.Second) // a liveness bound
	c, err := p.Get(context.Background(), deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(deadline)
	_, _ = io.WriteString(c.Writer(), "GET / HTTP/1.1\r\nHost: backend\r\n\r\n")
	if err := c.Writer().Flush(); err != nil {
		t.Fatal(err)
	}
	rh, err := ReadResponseHead(c.Reader(), http.Header{}, 8192)
	if err != nil {
		t.Fatal(err)
	}
	body := c.Body("GET", rh, nil)
	if got, err := io.ReadAll(body); err != nil || string(got) != "c1r1" {
		t.Fatalf("body %q, %v", got, err)
	}
	// Wait until the stray response is in the buffer, as it is when it
	// comes in the same segment.
	for c.Reader().Buffered() == 0 {
		if _, err := c.Reader().Peek(1); err != nil {
			t.Fatal(err)
		}
	}
	c.Release(true)
	if body, reused := get(t, p); body != "c2r1" || reused {
		t.Fatalf("next response %q (reused %v), want c2r1 on a new connection", body, reused)
	}
	if st := p.Stats(); st.Stale[StaleUnsolicited] != 1 || st.Dials != 2 {
		t.Fatalf("stats %+v: want 1 unsolicited, 2 dials", st)
	}
}

// The process-wide totals count dials, reuses and the healthy connections
// a full idle list could not keep.
func TestTotalCounts(t *testing.T) {
	b := newDesyncBackend(t, func(net.Conn) {}, make(chan struct{}))
	p := NewPool(b.ln.Addr().String(), PoolConfig{MaxIdle: 1})
	defer p.Close()
	before := TotalCounts()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	a, err := p.Get(ctx, deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Get(ctx, deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Release(true) // kept: the idle list has room for one
	c.Release(true) // not kept: the list is full
	d, err := p.Get(ctx, deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.Release(true)
	got := TotalCounts()
	if n := got.Dials - before.Dials; n != 2 {
		t.Errorf("dials grew by %d, want 2", n)
	}
	if n := got.Reuses - before.Reuses; n != 1 {
		t.Errorf("reuses grew by %d, want 1", n)
	}
	if n := got.NotKept - before.NotKept; n != 1 {
		t.Errorf("not kept grew by %d, want 1", n)
	}
	if st := p.Stats(); st.Dials != 2 || st.Reuses != 1 || st.Idle != 1 {
		t.Errorf("pool stats %+v, want 2 dials, 1 reuse, 1 idle", st)
	}
}
