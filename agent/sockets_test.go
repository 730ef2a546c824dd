package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rampart-edge/rampart/l7/handoff"
)

func TestSocketIndexesStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sockets.json")
	keepAll := func(sockKey) bool { return true }
	s := newSocketIndexes(path, 3)
	for i, k := range []sockKey{{"web", "tcp"}, {"tls", "tcp"}, {"tls", "udp"}} {
		got, err := s.assign(k, keepAll)
		if err != nil || got != uint32(i) {
			t.Fatalf("assign %v = %d, %v; want %d", k, got, err, i)
		}
	}
	if got, _ := s.assign(sockKey{"web", "tcp"}, keepAll); got != 0 {
		t.Fatalf("a key asked again moved to %d", got)
	}
	// A restarted agent reads the same slots back.
	s2 := newSocketIndexes(path, 3)
	for k, want := range map[sockKey]uint32{{"web", "tcp"}: 0, {"tls", "tcp"}: 1, {"tls", "udp"}: 2} {
		if got, ok := s2.lookup(k); !ok || got != want {
			t.Fatalf("after reload %v = %d, %v; want %d", k, got, ok, want)
		}
	}
	// Full: a new key takes the lowest slot of a key no longer needed,
	// and none while every key is.
	if _, err := s2.assign(sockKey{"api", "tcp"}, keepAll); err == nil || !strings.Contains(err.Error(), "no free steering slot") {
		t.Fatalf("full table: %v", err)
	}
	got, err := s2.assign(sockKey{"api", "tcp"}, func(k sockKey) bool { return k.Listener != "tls" })
	if err != nil || got != 1 {
		t.Fatalf("reuse: %d, %v; want slot 1 of tls/tcp", got, err)
	}
	if _, ok := s2.lookup(sockKey{"tls", "tcp"}); ok {
		t.Fatal("the reused key still has its slot")
	}
	// A smaller map: slots beyond it are forgotten and handed out again.
	s3 := newSocketIndexes(path, 2)
	if _, ok := s3.lookup(sockKey{"tls", "udp"}); ok {
		t.Fatal("slot 2 kept with a 2-slot map")
	}
	if got, _ := s3.assign(sockKey{"tls", "udp"}, keepAll); got > 1 {
		t.Fatalf("slot %d in a 2-slot map", got)
	}
}

// fakeSockmap records what the follower registers.
type fakeSockmap struct {
	mu   sync.Mutex
	reg  map[uint32]string // index → local address of the socket
	fail bool
}

func (m *fakeSockmap) RegisterSocketFD(i uint32, fd int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return unix.EINVAL
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return err
	}
	addr := ""
	if in4, ok := sa.(*unix.SockaddrInet4); ok {
		addr = net.JoinHostPort(net.IP(in4.Addr[:]).String(), strconv.Itoa(in4.Port))
	}
	m.reg[i] = addr
	return nil
}

func (m *fakeSockmap) UnregisterSocket(i uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.reg, i)
	return nil
}

// fakeProxy serves a hand-off socket with a settable socket set.
type fakeProxy struct {
	mu    sync.Mutex
	gen   uint64
	lns   map[string]*net.TCPListener
	stop  context.CancelFunc
	done  chan struct{}
	path  string
	calls int
}

func startFakeProxy(t *testing.T, path string, gen uint64, names ...string) *fakeProxy {
	t.Helper()
	p := &fakeProxy{gen: gen, lns: map[string]*net.TCPListener{}, path: path, done: make(chan struct{})}
	for _, n := range names {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p.lns[n] = ln.(*net.TCPListener)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	srv := &handoff.Server{Path: path, Sockets: p.sockets}
	go func() { defer close(p.done); _ = srv.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("hand-off socket did not appear")
		}
	}
	t.Cleanup(p.close)
	return p
}

func (p *fakeProxy) sockets(since uint64) (uint64, []handoff.Socket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if since == p.gen {
		return p.gen, nil
	}
	var out []handoff.Socket
	for n, ln := range p.lns {
		f, err := ln.File()
		if err == nil {
			out = append(out, handoff.Socket{Listener: n, Network: "tcp", Addr: ln.Addr().String(), File: f})
		}
	}
	return p.gen, out
}

func (p *fakeProxy) close() {
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, ln := range p.lns {
		ln.Close()
		delete(p.lns, n)
	}
}

func TestSocketFollower(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "handoff.sock")
	m := &fakeSockmap{reg: map[uint32]string{}}
	fl := &socketFollower{path: path, m: m, keep: func(sockKey) bool { return false },
		idx: newSocketIndexes(filepath.Join(dir, "sockets.json"), 8)}
	ctx := context.Background()

	if _, err := fl.fetch(ctx); err == nil {
		t.Fatal("fetch without a proxy succeeded")
	}
	p := startFakeProxy(t, path, 1, "web", "api")
	if changed, err := fl.fetch(ctx); err != nil || !changed {
		t.Fatalf("first fetch: %v %v", changed, err)
	}
	webIdx, ok1 := fl.index(sockKey{"web", "tcp"})
	_, ok2 := fl.index(sockKey{"api", "tcp"})
	if !ok1 || !ok2 || len(m.reg) != 2 || m.reg[webIdx] != p.lns["web"].Addr().String() {
		t.Fatalf("registered %v", m.reg)
	}
	if changed, err := fl.fetch(ctx); err != nil || changed {
		t.Fatalf("second fetch of the same generation: %v %v", changed, err)
	}
	// The proxy's sockets stay non-blocking (a blocking listener cannot be
	// closed while its accept waits: the proxy's drain would hang).
	for n, ln := range p.lns {
		rc, _ := ln.SyscallConn()
		var fl int
		_ = rc.Control(func(fd uintptr) { fl, _ = unix.FcntlInt(fd, unix.F_GETFL, 0) })
		if fl&unix.O_NONBLOCK == 0 {
			t.Fatalf("the proxy's %s listener is in blocking mode after the hand-off", n)
		}
	}

	// The agent's copies are closed: once the proxy closes a listener,
	// nothing accepts on it any more.
	p.mu.Lock()
	api := p.lns["api"]
	delete(p.lns, "api")
	p.gen = 2
	p.mu.Unlock()
	apiAddr := api.Addr().String()
	api.Close()
	if c, err := net.DialTimeout("tcp", apiAddr, time.Second); err == nil {
		c.Close()
		t.Fatal("a closed proxy listener still accepts: the agent kept a copy")
	}
	if changed, err := fl.fetch(ctx); err != nil || !changed {
		t.Fatalf("fetch after a change: %v %v", changed, err)
	}
	if _, ok := fl.index(sockKey{"api", "tcp"}); ok || len(m.reg) != 1 {
		t.Fatalf("api still registered: %v", m.reg)
	}

	// A restarted proxy starts its generations over; the new socket file
	// tells the follower to ask for everything.
	p.close()
	p2 := startFakeProxy(t, path, 2, "web")
	if changed, err := fl.fetch(ctx); err != nil || !changed {
		t.Fatalf("fetch from a restarted proxy with the same generation: %v %v", changed, err)
	}
	if i, _ := fl.index(sockKey{"web", "tcp"}); i != webIdx || m.reg[webIdx] != p2.lns["web"].Addr().String() {
		t.Fatalf("web moved to %d (was %d) or not re-registered: %v", i, webIdx, m.reg)
	}

	// A registration that fails is retried with a full fetch.
	m.fail = true
	p2.mu.Lock()
	p2.gen = 3
	p2.mu.Unlock()
	if _, err := fl.fetch(ctx); err == nil {
		t.Fatal("a failed registration was not reported")
	}
	if _, ok := fl.index(sockKey{"web", "tcp"}); !ok || len(m.reg) != 1 {
		t.Fatalf("a failed re-registration dropped the slot: %v", m.reg)
	}
	m.fail = false
	if changed, err := fl.fetch(ctx); err != nil || !changed || len(m.reg) != 1 {
		t.Fatalf("retry: %v %v %v", changed, err, m.reg)
	}
}
