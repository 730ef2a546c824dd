package bpf

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// lab is a client and a server namespace joined by a veth pair, with the
// filter attached in driver mode to the server side and sk_lookup steering
// VIP:port to the proxy's loopback sockets.
type lab struct {
	c, s   *netnstest.NS
	ifname string // server side
	root   string
	f      *Filter
	p      *proxy
	vipTCP string
}

func newLab(t testing.TB, o Options) *lab {
	t.Helper()
	needRoot(t)
	l := &lab{c: netnstest.New(t, "rt"), s: netnstest.New(t, "rt"), root: netnstest.PinRoot(t), vipTCP: "203.0.113.10:8080"}
	id := netnstest.Next()
	cif, sif := fmt.Sprintf("rtc%d", id), fmt.Sprintf("rts%d", id)
	l.ifname = sif
	netnstest.Run(t, "ip", "link", "add", cif, "netns", l.c.Name, "type", "veth", "peer", "name", sif, "netns", l.s.Name)
	l.c.IP(t, "addr", "add", "192.0.2.1/24", "dev", cif)
	l.c.IP(t, "addr", "add", "192.0.2.3/24", "dev", cif)
	l.c.IP(t, "addr", "add", "2001:db8::1/64", "dev", cif, "nodad")
	l.s.IP(t, "addr", "add", "192.0.2.2/24", "dev", sif)
	l.s.IP(t, "addr", "add", "2001:db8::2/64", "dev", sif, "nodad")
	l.c.IP(t, "link", "set", cif, "up")
	l.s.IP(t, "link", "set", sif, "up")
	l.c.IP(t, "route", "add", "203.0.113.0/24", "via", "192.0.2.2")
	l.c.IP(t, "-6", "route", "add", "2001:db8:1::/64", "via", "2001:db8::2")
	l.s.IP(t, "route", "add", "local", "203.0.113.0/24", "dev", "lo")
	l.s.IP(t, "-6", "route", "add", "local", "2001:db8:1::/64", "dev", "lo")

	var err error
	if l.f, err = Open(l.root, &o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.f.Remove() })
	l.p = startProxy(t, l.s)
	l.p.register(t, l.f)
	v4, v6 := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8:1::10")
	if err := l.f.SetVIPs([]VIP{
		{Addr: v4, Port: 8080, Proto: TCP, Socket: 0}, {Addr: v4, Port: udpPort, Proto: UDP, Socket: 1},
		{Addr: v6, Port: 8080, Proto: TCP, Socket: 2}, {Addr: v6, Port: udpPort, Proto: UDP, Socket: 3},
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.f.AttachSkLookup(l.s.Path); err != nil {
		t.Fatal(err)
	}
	var mode XDPMode
	l.s.Do(t, func() { mode, err = l.f.AttachXDP(sif, XDPDriver) })
	if err != nil || mode != XDPDriver {
		t.Fatalf("AttachXDP: %v %v", mode, err)
	}
	return l
}

func (l *lab) counters(t testing.TB) Counters {
	t.Helper()
	c, err := l.f.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (l *lab) xdpAttached(t testing.TB) bool {
	out, err := exec.Command("ip", "-n", l.s.Name, "link", "show", l.ifname).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link show: %v %s", err, out)
	}
	return strings.Contains(string(out), "xdp")
}

func TestEndToEndVeth(t *testing.T) {
	l := newLab(t, Options{MaxSources: 4096})
	const udpVIP = "203.0.113.10:8443"

	t.Run("allowed traffic reaches the proxy", func(t *testing.T) {
		mustAsk(t, l.c, "tcp", l.vipTCP, "tcp "+l.vipTCP)
		mustAsk(t, l.c, "udp", udpVIP, "udp 203.0.113.10")
		mustAsk(t, l.c, "tcp", "[2001:db8:1::10]:8080", "tcp [2001:db8:1::10]:8080")
		mustAsk(t, l.c, "udp", "[2001:db8:1::10]:8443", "udp 2001:db8:1::10")
		if c := l.counters(t); c[Pass] == 0 || c[Steered] < 4 {
			t.Fatalf("counters %v", c)
		}
	})

	t.Run("deny list change applies at once", func(t *testing.T) {
		before := l.counters(t)[DropDeny]
		start := time.Now()
		if err := l.f.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/31")}); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start) // the next packet is filtered by the new list
		if _, err := ask(t, l.c, "udp", udpVIP, "hi", 200*time.Millisecond); !isTimeout(err) {
			t.Fatalf("denied source answered: %v", err)
		}
		if _, err := ask(t, l.c, "tcp", l.vipTCP, "hi", 200*time.Millisecond); !isTimeout(err) {
			t.Fatalf("denied source connected: %v", err)
		}
		if d := l.counters(t)[DropDeny] - before; d < 2 {
			t.Fatalf("%d deny drops counted", d)
		}
		// The order is the assertion: the first probes after ReplaceDenyList
		// returned were dropped. Its duration is a figure.
		t.Logf("FIGURE ReplaceDenyList returned after %v; the next probe was dropped", took)
		if err := l.f.ReplaceDenyList(nil); err != nil {
			t.Fatal(err)
		}
		mustAsk(t, l.c, "udp", udpVIP, "udp 203.0.113.10")
	})

	t.Run("packet rate limit", func(t *testing.T) {
		if err := l.f.SetLimits(Limits{PPS: 100, PPSBurst: 100}); err != nil {
			t.Fatal(err)
		}
		defer l.f.SetLimits(Limits{})
		before, got0 := l.counters(t)[DropPPS], l.p.received("192.0.2.1")
		var c net.Conn
		var err error
		l.c.Do(t, func() { c, err = net.Dial("udp", udpVIP) })
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for range 1000 {
			c.Write([]byte("flood"))
		}
		el := time.Since(start)
		c.Close()
		time.Sleep(100 * time.Millisecond)
		got := l.p.received("192.0.2.1") - got0
		max := 100 + int(100*el.Seconds()) + 2
		drops := l.counters(t)[DropPPS] - before
		t.Logf("1000 datagrams in %v: %d received, %d dropped by XDP", el, got, drops)
		if got < 90 || got > max || drops < uint64(1000-max) {
			t.Fatalf("received %d (want 90..%d), dropped %d", got, max, drops)
		}
	})

	t.Run("SYN rate limit", func(t *testing.T) {
		if err := l.f.SetLimits(Limits{SYNRate: 1, SYNBurst: 2}); err != nil {
			t.Fatal(err)
		}
		defer l.f.SetLimits(Limits{})
		before := l.counters(t)[DropSYN]
		for range 2 {
			mustAsk(t, l.c, "tcp", l.vipTCP, "tcp "+l.vipTCP)
		}
		if _, err := ask(t, l.c, "tcp", l.vipTCP, "hi", 300*time.Millisecond); !isTimeout(err) {
			t.Fatalf("third SYN within the burst window was answered: %v", err)
		}
		if l.counters(t)[DropSYN] == before {
			t.Fatal("no SYN drop counted")
		}
	})

	t.Run("connection cap", func(t *testing.T) {
		if err := l.f.AttachConnTracker(""); err != nil {
			t.Fatal(err)
		}
		if err := l.f.SetLimits(Limits{MaxConns: 2}); err != nil {
			t.Fatal(err)
		}
		defer l.f.SetLimits(Limits{})
		src := netip.MustParseAddr("192.0.2.1")
		waitConns(t, l.f, src, 0)
		var held []net.Conn
		for range 2 {
			var c net.Conn
			var err error
			l.c.Do(t, func() { c, err = net.Dial("tcp", l.vipTCP) })
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "x\n")
			c.Read(make([]byte, 64))
			held = append(held, c)
		}
		waitConns(t, l.f, src, 2)
		before := l.counters(t)[DropConnCap]
		if _, err := ask(t, l.c, "tcp", l.vipTCP, "hi", 300*time.Millisecond); !isTimeout(err) {
			t.Fatalf("connection over the cap: %v", err)
		}
		if l.counters(t)[DropConnCap] == before {
			t.Fatal("no cap drop counted")
		}
		held[0].Close()
		waitConns(t, l.f, src, 1)
		mustAsk(t, l.c, "tcp", l.vipTCP, "tcp "+l.vipTCP)
		held[1].Close()
	})

	t.Run("agent restart keeps filtering", func(t *testing.T) {
		if err := l.f.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix("192.0.2.3/32")}); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for _, src := range []string{"192.0.2.1", "192.0.2.3"} {
			var c *net.UDPConn
			var err error
			l.c.Do(t, func() {
				c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(src+":0")),
					net.UDPAddrFromAddrPort(netip.MustParseAddrPort(udpVIP)))
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				for !stop.Load() {
					c.Write([]byte("tick"))
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		defer func() { stop.Store(true); wg.Wait() }()
		progress := func(phase string) {
			t.Helper()
			n := l.p.received("192.0.2.1")
			time.Sleep(200 * time.Millisecond)
			if l.p.received("192.0.2.1") == n {
				t.Fatalf("%s: allowed source not received", phase)
			}
			if d := l.p.received("192.0.2.3"); d != 0 {
				t.Fatalf("%s: %d datagrams from the denied source reached the proxy", phase, d)
			}
		}
		progress("before restart")
		c0 := l.counters(t)
		if err := l.f.Close(); err != nil {
			t.Fatal(err)
		}
		if !l.xdpAttached(t) {
			t.Fatal("XDP detached when the agent closed")
		}
		progress("agent down")
		f2, err := Open(l.root, &Options{MaxSources: 4096})
		if err != nil {
			t.Fatal(err)
		}
		l.f = f2 // the lab's cleanup removes the new one
		progress("after takeover")
		a := f2.Attachments()
		if !slices.Contains(a, "sklookup-"+inodeStr(t, l.s.Path)) || !slices.Contains(a, pinXDPDriver+l.ifname) {
			t.Fatalf("attachments after takeover: %v", a)
		}
		info, err := f2.links[pinXDPDriver+l.ifname].Info()
		pinfo, err2 := f2.objs.RampartXdp.Info()
		id, _ := pinfo.ID()
		if err != nil || err2 != nil || info.Program != id {
			t.Fatalf("XDP link runs program %v, want the reopened one %v (%v %v)", info, id, err, err2)
		}
		mode := XDPMode(0)
		l.s.Do(t, func() { mode, err = f2.AttachXDP(l.ifname, XDPAuto) })
		if err != nil || mode != XDPDriver {
			t.Fatalf("AttachXDP after takeover: %v %v", mode, err)
		}
		if c1 := l.counters(t); c1[DropDeny] <= c0[DropDeny] || c1[Pass] <= c0[Pass] {
			t.Fatalf("counters did not carry on: %v -> %v", c0, c1)
		}
		if got := f2.Limits(); got != (Limits{MaxConns: 0}) {
			t.Fatalf("limits after takeover: %+v", got)
		}
	})
}

func inodeStr(t testing.TB, path string) string {
	ino, err := inode(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(ino)
}
