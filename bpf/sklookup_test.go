package bpf

import (
	"errors"
	"math/bits"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
	"golang.org/x/sys/unix"
)

// TestSkLookup steers TCP and UDP for v4 and v6 VIPs to sockets bound to
// loopback in a test namespace, changes VIPs without touching the sockets,
// and checks the sockops connection counts.
func TestSkLookup(t *testing.T) {
	f := openTest(t, Options{MaxSources: 1024})
	ns := netnstest.New(t, "rt")
	ns.IP(t, "route", "add", "local", "203.0.113.0/24", "dev", "lo")
	ns.IP(t, "-6", "route", "add", "local", "2001:db8:1::/64", "dev", "lo")
	p := startProxy(t, ns)
	p.register(t, f)
	if err := f.AttachSkLookup(ns.Path); err != nil {
		t.Fatal(err)
	}
	if err := f.AttachConnTracker(""); err != nil {
		t.Fatal(err)
	}
	v4, v6 := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8:1::10")
	if err := f.SetVIPs([]VIP{
		{Addr: v4, Port: 8080, Proto: TCP, Socket: 0}, {Addr: v4, Port: udpPort, Proto: UDP, Socket: 1},
		{Addr: v6, Port: 8080, Proto: TCP, Socket: 2}, {Addr: v6, Port: udpPort, Proto: UDP, Socket: 3},
	}); err != nil {
		t.Fatal(err)
	}
	mustAsk(t, ns, "tcp", "203.0.113.10:8080", "tcp 203.0.113.10:8080")
	mustAsk(t, ns, "udp", "203.0.113.10:8443", "udp 203.0.113.10")
	mustAsk(t, ns, "tcp", "[2001:db8:1::10]:8080", "tcp [2001:db8:1::10]:8080")
	mustAsk(t, ns, "udp", "[2001:db8:1::10]:8443", "udp 2001:db8:1::10")
	if _, err := ask(t, ns, "tcp", "203.0.113.10:8081", "hi", time.Second); err == nil {
		t.Fatal("a port that is not a VIP port was answered")
	}

	// New VIPs at runtime, same sockets.
	if err := f.SetVIPs([]VIP{{Addr: netip.MustParseAddr("203.0.113.20"), Port: 9090, Proto: TCP, Socket: 0}}); err != nil {
		t.Fatal(err)
	}
	mustAsk(t, ns, "tcp", "203.0.113.20:9090", "tcp 203.0.113.20:9090")
	if _, err := ask(t, ns, "tcp", "203.0.113.10:8080", "hi", time.Second); err == nil {
		t.Fatal("removed VIP still answered")
	}

	// Connection counts: 3 held connections, then closed one by one.
	var conns []net.Conn
	var src netip.Addr
	for range 3 {
		var c net.Conn
		var err error
		ns.Do(t, func() { c, err = net.Dial("tcp", "203.0.113.20:9090") })
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		src = c.LocalAddr().(*net.TCPAddr).AddrPort().Addr()
	}
	for _, c := range conns { // a round trip: established on the server side
		if _, err := c.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
	waitConns(t, f, src, 3)
	for i, c := range conns {
		c.Close()
		waitConns(t, f, src, uint32(2-i))
	}
	var n uint32
	if err := f.objs.RtConns.Lookup(srcKey(src), &n); !isNotExist(err) {
		t.Fatalf("entry left at zero connections: %d %v", n, err)
	}
	// IPv6 connections count per /64.
	if err := f.SetVIPs([]VIP{{Addr: v6, Port: 8080, Proto: TCP, Socket: 2}}); err != nil {
		t.Fatal(err)
	}
	var c6 net.Conn
	var err error
	ns.Do(t, func() { c6, err = net.Dial("tcp", "[2001:db8:1::10]:8080") })
	if err != nil {
		t.Fatal(err)
	}
	c6.Write([]byte("x\n"))
	c6.Read(make([]byte, 64))
	src6 := c6.LocalAddr().(*net.TCPAddr).AddrPort().Addr()
	waitConns(t, f, src6, 1)
	c6.Close()
	waitConns(t, f, src6, 0)
	c, err := f.ReadCounters()
	if err != nil || c[Steered] < 7 {
		t.Fatalf("counters %v %v: want steered >= 6", c, err)
	}
}

// waitConns waits until src's connection count, and its bucket's sum in
// rt_connsum (the only source of its bucket in these tests), are want.
func waitConns(t testing.TB, f *Filter, src netip.Addr, want uint32) {
	t.Helper()
	var got, sum uint32
	b := uint32(mixKey(srcKey(src)) >> (64 - bits.TrailingZeros32(f.objs.RtConnsum.MaxEntries())))
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if got, err = f.ConnCount(src); err != nil {
			t.Fatal(err)
		}
		if err = f.objs.RtConnsum.Lookup(b, &sum); err != nil {
			t.Fatal(err)
		}
		if got == want && sum == want {
			return
		}
	}
	t.Fatalf("connection count of %v: %d, its bucket's sum %d; want %d", src, got, sum, want)
}

// A cgroup directory that does not exist is refused with its path named,
// on attach and on detach, and nothing is pinned.
func TestConnTrackerMissingCgroup(t *testing.T) {
	f := openTest(t, Options{MaxSources: 1024})
	missing := filepath.Join(t.TempDir(), "no-such-cgroup")
	for name, op := range map[string]func(string) error{"attach": f.AttachConnTracker, "detach": f.DetachConnTracker} {
		err := op(missing)
		if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, unix.ENOENT) {
			t.Errorf("%s %s: %v", name, missing, err)
		}
	}
	if a := f.Attachments(); len(a) != 0 {
		t.Errorf("attachments after a refused attach: %v", a)
	}
}
