package pktgen

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// pair is two namespaces joined by a veth: the sender (a0 in A:
// 192.0.2.1/24, fd00:99::1/64, routes to 203.0.113.0/24 and fd00:98::/64
// via B) and the receiver (b0 in B: 192.0.2.2/24, fd00:99::2/64;
// 203.0.113.10 and fd00:98::10 local on lo; reverse-path filter off, so
// spoofed sources are taken).
type pair struct {
	a, b   *netnstest.NS
	aIf    string
	bIf    string
	aMAC   net.HardwareAddr
	bMAC   net.HardwareAddr
	target [2]netip.Addr // v4, v6
}

func newPair(t *testing.T) *pair { return newPairB(t) }

func newPairB(t testing.TB) *pair {
	netnstest.NeedRoot(t, "network namespaces, veth, AF_PACKET")
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("needs %s", tool)
			}
			t.Skipf("needs %s", tool)
		}
	}
	p := &pair{a: netnstest.New(t, "pga"), b: netnstest.New(t, "pgb"), aIf: "a0", bIf: "b0",
		target: [2]netip.Addr{netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("fd00:98::10")}}
	p.a.IP(t, "link", "add", p.aIf, "type", "veth", "peer", "name", p.bIf, "netns", p.b.Name)
	p.a.IP(t, "addr", "add", "192.0.2.1/24", "dev", p.aIf)
	p.a.IP(t, "addr", "add", "fd00:99::1/64", "dev", p.aIf, "nodad")
	p.b.IP(t, "addr", "add", "192.0.2.2/24", "dev", p.bIf)
	p.b.IP(t, "addr", "add", "fd00:99::2/64", "dev", p.bIf, "nodad")
	p.b.IP(t, "addr", "add", "203.0.113.10/32", "dev", "lo")
	p.b.IP(t, "addr", "add", "fd00:98::10/128", "dev", "lo")
	p.a.IP(t, "link", "set", p.aIf, "up")
	p.b.IP(t, "link", "set", p.bIf, "up")
	p.a.IP(t, "route", "add", "203.0.113.0/24", "via", "192.0.2.2")
	p.a.IP(t, "route", "add", "fd00:98::/64", "via", "fd00:99::2")
	for _, k := range []string{"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0", "net.ipv4.conf." + p.bIf + ".rp_filter=0"} {
		netnstest.Run(t, "nsenter", "--net="+p.b.Path, "--", "sysctl", "-qw", k)
	}
	p.a.Do(t, func() { p.aMAC = iface(t, p.aIf).HardwareAddr })
	p.b.Do(t, func() { p.bMAC = iface(t, p.bIf).HardwareAddr })
	return p
}

func iface(t testing.TB, name string) *net.Interface {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ifc
}

func ifindex(t testing.TB, name string) int { return iface(t, name).Index }

// capture keeps the frames coming in on the receiver's veth.
type capture struct{ l *Listener }

func (p *pair) capture(t *testing.T) *capture {
	l, err := Listen(p.b.Path, p.bIf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &capture{l}
}

// frames reads incoming frames until want of them go to dst (30 s
// deadline), then what else comes in the next 200 ms; it returns those to dst
// (raw) and fails the test if the socket dropped any.
func (c *capture) frames(t *testing.T, dst netip.AddrPort, want int) [][]byte {
	t.Helper()
	var got [][]byte
	deadline := time.Now().Add(30 * time.Second)
	drain := false
	for {
		if !drain && len(got) >= want {
			drain, deadline = true, time.Now().Add(200*time.Millisecond)
		}
		f, ok, err := c.l.Next(time.Until(deadline))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if a, port, ok := rawDst(f); ok && a == dst.Addr() && port == dst.Port() {
			got = append(got, bytes.Clone(f))
		}
	}
	if d, err := c.l.Drops(); err != nil || d != 0 {
		t.Fatalf("capture socket dropped %d frames (%v): counts cannot be compared", d, err)
	}
	return got
}

// rawDst reads a frame's IP destination and L4 destination port by
// offset alone (no checks), so frames that fail Parse are still seen.
func rawDst(f []byte) (netip.Addr, uint16, bool) {
	if len(f) < ethLen+ip4Len+4 {
		return netip.Addr{}, 0, false
	}
	switch {
	case f[12] == 0x08 && f[13] == 0x00:
		hl := int(f[ethLen]&0xf) * 4
		if len(f) < ethLen+hl+4 {
			return netip.Addr{}, 0, false
		}
		return netip.AddrFrom4([4]byte(f[ethLen+16 : ethLen+20])), uint16(f[ethLen+hl+2])<<8 | uint16(f[ethLen+hl+3]), true
	case f[12] == 0x86 && f[13] == 0xdd && len(f) >= ethLen+ip6Len+4:
		return netip.AddrFrom16([16]byte(f[ethLen+24 : ethLen+40])), uint16(f[ethLen+ip6Len+2])<<8 | uint16(f[ethLen+ip6Len+3]), true
	}
	return netip.Addr{}, 0, false
}

// snmp reads the receiver's /proc/net/snmp and snmp6 counters as
// "Proto.Name" → value (snmp6 names are already unique).
func (p *pair) snmp(t *testing.T) map[string]uint64 {
	out := map[string]uint64{}
	p.b.Do(t, func() {
		data, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			for j := 1; j < len(names) && j < len(vals); j++ {
				v, _ := strconv.ParseUint(vals[j], 10, 64)
				out[strings.TrimSuffix(names[0], ":")+"."+names[j]] = v
			}
		}
		data, err = os.ReadFile("/proc/thread-self/net/snmp6")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				out[f[0]] = v
			}
		}
	})
	return out
}

// udpSink is a UDP socket on the receiver counting datagrams by source.
func (p *pair) udpSink(t *testing.T, at netip.AddrPort) *net.UDPConn {
	var c *net.UDPConn
	p.b.Do(t, func() {
		var err error
		if c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(at)); err != nil {
			t.Fatal(err)
		}
	})
	if err := c.SetReadBuffer(32 << 20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// received reads datagrams until want have arrived (30 s deadline) and
// nothing more is queued; every source must be in cidr.
func received(t *testing.T, c *net.UDPConn, cidr netip.Prefix, payload, want int) int {
	t.Helper()
	n := 0
	buf := make([]byte, 2048)
	deadline := time.Now().Add(30 * time.Second)
	for {
		wait := 200 * time.Millisecond
		if n < want {
			wait = time.Until(deadline)
		}
		c.SetReadDeadline(time.Now().Add(wait))
		m, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return n
		}
		if !cidr.Contains(from.Addr().Unmap()) || m != payload {
			t.Fatalf("datagram from %v with %d bytes (want a source in %v, %d bytes)", from, m, cidr, payload)
		}
		n++
	}
}

func TestSendOverVeth(t *testing.T) {
	p := newPair(t)
	ctx := context.Background()
	cases := []struct {
		name       string
		cidr       string
		v6         bool
		kind       Kind
		sequential bool
		payload    int
		rate       float64
		count      uint64
		sport      uint16
	}{
		{"udp4-random-paced", "198.51.100.0/24", false, UDP, false, 18, 20000, 3000, 0},
		{"syn4-sequential-unpaced", "198.51.100.32/28", false, SYN, true, 0, 0, 2000, 0},
		{"ack6-random", "fd00:1::/64", true, ACK, false, 0, 50000, 2000, 4321},
		{"udp6-sequential", "fd00:2::100/120", true, UDP, true, 100, 0, 1500, 0},
		{"syn6-one-source", "2001:db8:7::5/128", true, SYN, false, 0, 30000, 1000, 0},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := netip.AddrPortFrom(p.target[0], uint16(5000+i))
			if c.v6 {
				dst = netip.AddrPortFrom(p.target[1], uint16(5000+i))
			}
			cidr := netip.MustParsePrefix(c.cidr)
			var sink *net.UDPConn
			if c.kind == UDP {
				sink = p.udpSink(t, dst)
			}
			cap := p.capture(t)
			before := p.snmp(t)
			cfg := Config{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: cidr, Sequential: c.sequential, SrcPort: c.sport,
				Dst: dst, Kind: c.kind, Payload: c.payload, Rate: c.rate, Count: c.count, Batch: 64, QdiscBypass: i%2 == 0, Seed: uint64(i)}
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
			if rep.Sent != c.count {
				t.Fatalf("sent %d, want %d", rep.Sent, c.count)
			}
			frames := cap.frames(t, dst, int(c.count))
			if len(frames) != int(c.count) {
				t.Fatalf("received %d frames to %v, sent %d", len(frames), dst, c.count)
			}
			seq, _ := NewSources(cidr, true, 0, 1, 0)
			for j, f := range frames {
				pk, err := Parse(f)
				if err != nil {
					t.Fatalf("frame %d: %v\n%x", j, err, f)
				}
				if pk.Kind() != c.kind || pk.Dst != dst.Addr() || pk.DstPort != dst.Port() || !cidr.Contains(pk.Src) ||
					len(pk.Payload) != c.payload || !bytes.Equal(pk.SrcMAC, p.aMAC) || !bytes.Equal(pk.DstMAC, p.bMAC) {
					t.Fatalf("frame %d: %+v (want %v from %v to %v, %d bytes, MAC %v → %v)", j, pk, c.kind, cidr, dst, c.payload, p.aMAC, p.bMAC)
				}
				if want := seq.Next(); c.sequential && pk.Src != want {
					t.Fatalf("frame %d: source %v, want %v (sequential)", j, pk.Src, want)
				}
				if wantPort := uint16(49152 + j%16384); c.sport == 0 && pk.SrcPort != wantPort || c.sport != 0 && pk.SrcPort != c.sport {
					t.Fatalf("frame %d: source port %d", j, pk.SrcPort)
				}
			}
			// The receiving kernel verified the checksums too.
			after := p.snmp(t)
			d := func(k string) uint64 { return after[k] - before[k] }
			switch {
			case c.kind == UDP && !c.v6:
				if n := received(t, sink, cidr, c.payload, int(c.count)); n != int(c.count) || d("Udp.InCsumErrors") != 0 {
					t.Fatalf("UDP socket got %d datagrams of %d, %d checksum errors", n, c.count, d("Udp.InCsumErrors"))
				}
			case c.kind == UDP:
				if n := received(t, sink, cidr, c.payload, int(c.count)); n != int(c.count) || d("Udp6InCsumErrors") != 0 {
					t.Fatalf("UDP socket got %d datagrams of %d, %d checksum errors", n, c.count, d("Udp6InCsumErrors"))
				}
			default:
				if d("Tcp.InSegs") < c.count || d("Tcp.InCsumErrors") != 0 {
					t.Fatalf("kernel TCP: %d segments in, %d checksum errors; sent %d", d("Tcp.InSegs"), d("Tcp.InCsumErrors"), c.count)
				}
			}
		})
	}
}

// A run bounded by a duration at a paced rate never sends more than the
// pacer allows (each worker: its rate × the duration + 1), and every
// frame arrives.
func TestPacedDuration(t *testing.T) {
	p := newPair(t)
	dst := netip.AddrPortFrom(p.target[0], 6000)
	cap := p.capture(t)
	rep, err := Run(context.Background(), Config{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("198.51.100.0/25"),
		Dst: dst, Kind: SYN, Rate: 4000, Duration: 500 * time.Millisecond, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	if rep.Sent == 0 || rep.Sent > 2000+2 { // 2 workers, each ≤ 2000 pps × 0.5 s + 1
		t.Fatalf("sent %d frames, the pacer allows at most %d", rep.Sent, 2000+2)
	}
	if got := cap.frames(t, dst, int(rep.Sent)); len(got) != int(rep.Sent) {
		t.Fatalf("received %d frames, sent %d", len(got), rep.Sent)
	}
}

// Cancelling the context ends a long run early and the report counts
// exactly what went out; bad configurations are refused with the reason.
func TestCancelAndErrors(t *testing.T) {
	p := newPair(t)
	dst := netip.AddrPortFrom(p.target[0], 6001)
	cap := p.capture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Report)
	go func() {
		rep, err := Run(ctx, Config{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("198.51.100.9/32"),
			Dst: dst, Kind: UDP, Rate: 1000, Duration: time.Hour})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	// Cancel once frames are flowing.
	first := cap.frames(t, dst, 1)
	cancel()
	rep := <-done
	if rep.Sent < uint64(len(first)) {
		t.Fatalf("report says %d sent, %d already received", rep.Sent, len(first))
	}
	if rest := cap.frames(t, dst, int(rep.Sent)-len(first)); len(first)+len(rest) != int(rep.Sent) {
		t.Fatalf("received %d frames, report says %d", len(first)+len(rest), rep.Sent)
	}

	for _, c := range []Config{
		{NetNS: p.a.Path, Iface: "nope0", SrcCIDR: netip.MustParsePrefix("198.51.100.0/24"), Dst: dst, Count: 1},
		{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("fd00::/64"), Dst: dst, Count: 1},
		{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("198.51.100.0/24"), Dst: dst},
		{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("198.51.100.0/24"), Dst: netip.MustParseAddrPort("192.0.2.99:80"), Count: 1}, // on link, never answers ARP
		{NetNS: "/run/netns/rampart-pktgen-none", Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("198.51.100.0/24"), Dst: dst, Count: 1},
	} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%+v: no error", c)
		} else {
			t.Log(err)
		}
	}
}

func TestCommand(t *testing.T) {
	p := newPair(t)
	dst := netip.AddrPortFrom(p.target[1], 6002)
	cap := p.capture(t)
	var out bytes.Buffer
	err := Command(context.Background(), []string{"-netns", p.a.Path, "-iface", p.aIf, "-src-cidr", "fd00:3::/64",
		"-dst", dst.String(), "-proto", "udp", "-count", "500", "-rate", "10000", "-dst-mac", p.bMAC.String()}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sent 500 udp frames") {
		t.Fatalf("report: %s", out.String())
	}
	if got := cap.frames(t, dst, 500); len(got) != 500 {
		t.Fatalf("received %d frames of 500", len(got))
	}
	for _, args := range [][]string{
		{}, {"-iface", "x", "-src-cidr", "10.0.0.0/33", "-dst", "192.0.2.1:80"},
		{"-iface", "x", "-src-cidr", "10.0.0.0/8", "-dst", "192.0.2.1"},
		{"-iface", "x", "-src-cidr", "10.0.0.0/8", "-dst", "192.0.2.1:80", "-proto", "icmp"},
		{"-iface", "x", "-src-cidr", "10.0.0.0/8", "-dst", "192.0.2.1:80", "-dst-mac", "zz"},
		{"-iface", "x", "-src-cidr", "10.0.0.0/8", "-dst", "192.0.2.1:80", "-sport", "70000"},
	} {
		out.Reset()
		if err := Command(context.Background(), args, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

func TestNextHop(t *testing.T) {
	p := newPair(t)
	for _, a := range []string{"203.0.113.10", "192.0.2.2", "fd00:98::10", "fd00:99::2"} {
		h, err := NextHop(p.a.Path, netip.MustParseAddr(a))
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if h.Iface != p.aIf || !bytes.Equal(h.MAC, p.bMAC) {
			t.Fatalf("%s: next hop %s %v, want %s %v", a, h.Iface, h.MAC, p.aIf, p.bMAC)
		}
	}
	if h, err := NextHop(p.a.Path, netip.MustParseAddr("198.18.0.1")); err == nil {
		t.Fatalf("no route: got %+v", h)
	}
}
