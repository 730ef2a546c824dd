package bpf

import (
	"errors"
	"math/bits"
	"net/netip"
	"testing"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

const (
	xdpDrop = 1
	xdpPass = 2
)

var testVIPs = []VIP{
	{Addr: netip.MustParseAddr("203.0.113.10"), Port: 80, Proto: TCP, Socket: 0},
	{Addr: netip.MustParseAddr("203.0.113.10"), Port: 443, Proto: UDP, Socket: 1},
	{Addr: netip.MustParseAddr("2001:db8::10"), Port: 80, Proto: TCP, Socket: 0},
	{Addr: netip.MustParseAddr("2001:db8::10"), Port: 443, Proto: UDP, Socket: 1},
}

// run runs one frame and returns the action and the one reason counted.
func (f *Filter) run(t testing.TB, frame []byte) (uint32, Reason) {
	t.Helper()
	before, err := f.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	ret, _, err := f.objs.RampartXdp.Test(frame)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	after, err := f.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	reason, n := NumReasons, 0
	for r := range NumReasons {
		if d := after[r] - before[r]; d != 0 {
			reason, n = r, n+int(d)
		}
	}
	if n != 1 {
		t.Fatalf("counters moved by %d (want exactly 1): %v -> %v", n, before, after)
	}
	return ret, reason
}

func (f *Filter) expect(t testing.TB, frame []byte, action uint32, reason Reason) {
	t.Helper()
	a, r := f.run(t, frame)
	if a != action || r != reason {
		t.Fatalf("got action %d reason %v, want %d %v", a, r, action, reason)
	}
}

func openVIPs(t testing.TB, o Options) *Filter {
	f := openTest(t, o)
	if err := f.SetVIPs(testVIPs); err != nil {
		t.Fatal(err)
	}
	f.setClock(t, 1e12)
	return f
}

func tcp4(src string, flags uint8) pkt {
	return pkt{src: src, dst: "203.0.113.10", proto: 6, sport: 40000, dport: 80, flags: flags}
}

func TestParseAndMatch(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	v4 := tcp4("192.0.2.1", 0)
	v6 := pkt{src: "2001:db8:1::1", dst: "2001:db8::10", proto: 6, sport: 40000, dport: 80}
	with := func(p pkt, mod func(*pkt)) pkt { mod(&p); return p }
	mut := func(b []byte, i int, v byte) []byte { b[i] = v; return b }
	arp := mut(mut(make([]byte, 42), 12, 0x08), 13, 0x06)
	cases := []struct {
		name   string
		frame  []byte
		action uint32
		reason Reason
	}{
		{"v4 non-VIP address", with(v4, func(p *pkt) { p.dst = "198.51.100.1" }).bytes(), xdpPass, PassNotVIP},
		{"v4 VIP other port", with(v4, func(p *pkt) { p.dport = 22 }).bytes(), xdpPass, PassNotVIP},
		{"v4 VIP port other proto", with(v4, func(p *pkt) { p.proto = 17 }).bytes(), xdpPass, PassNotVIP},
		{"v4 ICMP to VIP", with(v4, func(p *pkt) { p.proto = 1 }).bytes(), xdpPass, PassNotVIP},
		{"ARP", arp, xdpPass, PassNotVIP},
		{"v6 non-VIP", with(v6, func(p *pkt) { p.dst = "2001:db8::11" }).bytes(), xdpPass, PassNotVIP},
		{"v4 VIP TCP", v4.bytes(), xdpPass, Pass},
		{"v4 VIP UDP", pkt{src: "192.0.2.1", dst: "203.0.113.10", proto: 17, sport: 5000, dport: 443}.bytes(), xdpPass, Pass},
		{"v4 options", with(v4, func(p *pkt) { p.ipOpts = 12 }).bytes(), xdpPass, Pass},
		{"v6 VIP TCP", v6.bytes(), xdpPass, Pass},
		{"v6 VIP UDP", pkt{src: "2001:db8:1::1", dst: "2001:db8::10", proto: 17, sport: 5000, dport: 443}.bytes(), xdpPass, Pass},
		{"v6 one ext header", with(v6, func(p *pkt) { p.ext = []uint8{0} }).bytes(), xdpPass, Pass},
		{"v6 two ext headers", with(v6, func(p *pkt) { p.ext = []uint8{0, 60} }).bytes(), xdpPass, Pass},
		{"v6 three ext headers", with(v6, func(p *pkt) { p.ext = []uint8{0, 60, 60} }).bytes(), xdpDrop, DropMalformed},
		{"802.1Q VIP", with(v4, func(p *pkt) { p.vlans = []uint16{0x8100} }).bytes(), xdpPass, Pass},
		{"802.1Q non-VIP", with(v4, func(p *pkt) { p.vlans = []uint16{0x8100}; p.dport = 22 }).bytes(), xdpPass, PassNotVIP},
		{"802.1ad+802.1Q VIP v6", with(v6, func(p *pkt) { p.vlans = []uint16{0x88a8, 0x8100} }).bytes(), xdpPass, Pass},
		{"three VLAN tags", with(v4, func(p *pkt) { p.vlans = []uint16{0x88a8, 0x8100, 0x8100} }).bytes(), xdpPass, PassMalformed},
		{"truncated VLAN tag", mut(mut(make([]byte, 16), 12, 0x81), 13, 0), xdpPass, PassMalformed},
		{"truncated IPv4 header", v4.bytes()[:14+12], xdpPass, PassMalformed},
		{"truncated IPv6 header", v6.bytes()[:14+30], xdpPass, PassMalformed},
		{"v4 bad version to VIP", mut(v4.bytes(), 14, 0x55), xdpDrop, DropMalformed},
		{"v4 ihl < 5 to VIP", mut(v4.bytes(), 14, 0x44), xdpDrop, DropMalformed},
		{"truncated TCP to VIP", with(v4, func(p *pkt) { p.truncate = 10 }).bytes(), xdpDrop, DropMalformed},
		{"truncated TCP to non-VIP", with(v4, func(p *pkt) { p.truncate = 10; p.dst = "198.51.100.1" }).bytes(), xdpPass, PassMalformed},
		{"v4 total length beyond frame", with(v4, func(p *pkt) { p.payload = 20; p.truncate = 5 }).bytes(), xdpDrop, DropMalformed},
		{"v6 payload beyond frame", with(v6, func(p *pkt) { p.payload = 20; p.truncate = 5 }).bytes(), xdpDrop, DropMalformed},
		{"TCP doff < 5", mut(v4.bytes(), 14+20+12, 4<<4), xdpDrop, DropMalformed},
		{"UDP length < 8", mut(pkt{src: "192.0.2.1", dst: "203.0.113.10", proto: 17, sport: 5000, dport: 443}.bytes(), 14+20+5, 4), xdpDrop, DropMalformed},
		{"SYN+FIN", tcp4("192.0.2.1", fSYN|fFIN).bytes(), xdpDrop, DropMalformed},
		{"SYN+RST", tcp4("192.0.2.1", fSYN|fRST).bytes(), xdpDrop, DropMalformed},
		{"v4 fragment to VIP", with(v4, func(p *pkt) { p.frag = true }).bytes(), xdpDrop, DropMalformed},
		{"v4 fragment to non-VIP", with(v4, func(p *pkt) { p.frag = true; p.dst = "198.51.100.1" }).bytes(), xdpPass, PassNotVIP},
		{"v6 fragment to VIP", with(v6, func(p *pkt) { p.frag = true }).bytes(), xdpDrop, DropMalformed},
		{"v6 multicast source to VIP", with(v6, func(p *pkt) { p.src = "ff02::1" }).bytes(), xdpDrop, DropMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { f.expect(t, c.frame, c.action, c.reason) })
	}

	t.Run("policy: pass malformed VIP, drop malformed other", func(t *testing.T) {
		if err := f.SetLimits(Limits{MalformedVIPPass: true, MalformedOtherDrop: true}); err != nil {
			t.Fatal(err)
		}
		defer f.SetLimits(Limits{})
		f.expect(t, with(v4, func(p *pkt) { p.truncate = 10 }).bytes(), xdpPass, PassMalformed)
		f.expect(t, with(v4, func(p *pkt) { p.truncate = 10; p.dst = "198.51.100.1" }).bytes(), xdpDrop, DropMalformed)
		f.expect(t, with(v4, func(p *pkt) { p.vlans = []uint16{0x8100, 0x8100, 0x8100} }).bytes(), xdpDrop, DropMalformed)
		f.expect(t, v4.bytes(), xdpPass, Pass)
		f.expect(t, with(v4, func(p *pkt) { p.dport = 22 }).bytes(), xdpPass, PassNotVIP)
	})
}

func TestDeny(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	v6 := func(src string) []byte {
		return pkt{src: src, dst: "2001:db8::10", proto: 6, sport: 1, dport: 80}.bytes()
	}
	known := tcp4("192.0.2.77", 0).bytes()
	f.expect(t, known, xdpPass, Pass) // has state (a cached "not denied") before the swap
	list := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("198.51.0.0/16"),
		netip.MustParsePrefix("192.0.2.77/32"),
		netip.MustParsePrefix("2001:db8:bad::/48"),
	}
	if err := f.ReplaceDenyList(list); err != nil {
		t.Fatal(err)
	}
	f.expect(t, known, xdpDrop, DropDeny) // cache invalidated by the generation
	f.expect(t, known, xdpDrop, DropDeny) // cached "denied"
	f.expect(t, tcp4("198.51.100.200", 0).bytes(), xdpDrop, DropDeny)
	f.expect(t, tcp4("198.51.7.1", 0).bytes(), xdpDrop, DropDeny)
	f.expect(t, tcp4("198.50.255.255", 0).bytes(), xdpPass, Pass)
	f.expect(t, tcp4("192.0.2.78", 0).bytes(), xdpPass, Pass)
	f.expect(t, with4(tcp4("198.51.100.200", 0), 22), xdpPass, PassNotVIP) // management: never touched
	f.expect(t, v6("2001:db8:bad:ffff::1"), xdpDrop, DropDeny)
	f.expect(t, v6("2001:db8:bae::1"), xdpPass, Pass)

	// A /128 inside a /64 that also holds an allowed source: no per-/64 cache.
	if err := f.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix("2001:db8:1:2::bad/128")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.expect(t, v6("2001:db8:1:2::bad"), xdpDrop, DropDeny)
		f.expect(t, v6("2001:db8:1:2::900d"), xdpPass, Pass)
	}
	f.expect(t, known, xdpPass, Pass) // removed from the list: allowed again at once

	// A /64 denied whole, then (in place) only one address in it; and a /128
	// inside a denied /48 (no SPLIT mark: the /48 covers it).
	for _, c := range []struct {
		list    []string
		bad, ok []string
	}{
		{[]string{"2001:db8:9:9::/64"}, []string{"2001:db8:9:9::1", "2001:db8:9:9::2"}, nil},
		{[]string{"2001:db8:9:9::1/128"}, []string{"2001:db8:9:9::1"}, []string{"2001:db8:9:9::2"}},
		{[]string{"2001:db8:9::/48", "2001:db8:9:9::1/128"}, []string{"2001:db8:9:9::1", "2001:db8:9:9::2"}, []string{"2001:db8:a::1"}},
	} {
		var list []netip.Prefix
		for _, p := range c.list {
			list = append(list, netip.MustParsePrefix(p))
		}
		if err := f.ReplaceDenyList(list); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second time from the per-source cache
			for _, a := range c.bad {
				f.expect(t, v6(a), xdpDrop, DropDeny)
			}
			for _, a := range c.ok {
				f.expect(t, v6(a), xdpPass, Pass)
			}
		}
	}

	if err := f.ReplaceDenyList(nil); err != nil {
		t.Fatal(err)
	}
	f.expect(t, v6("2001:db8:1:2::bad"), xdpPass, Pass)
	if s, err := f.Stats(); err != nil || s.Deny4 != 0 || s.Deny6 != 0 {
		t.Fatalf("Stats %+v %v", s, err)
	}
}

// TestSplitLastAddress: in a SPLIT /64, the source entry remembers the last
// address found not denied (xpass); another address, a deny swap and an
// in-place edit all go back to the exact verdict.
func TestSplitLastAddress(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	v6 := func(src string) []byte {
		return pkt{src: src, dst: "2001:db8::10", proto: 6, sport: 1, dport: 80}.bytes()
	}
	const bad, good, other = "2001:db8:1:2::bad", "2001:db8:1:2::900d", "2001:db8:1:2::1"
	if err := f.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix(bad + "/128")}); err != nil {
		t.Fatal(err)
	}
	f.expect(t, v6(good), xdpPass, Pass) // new entry: xpass = good
	if got := f.xpass(t, good); got != lo64(good) {
		t.Fatalf("xpass after admitting %s: %#x, want %#x", good, got, lo64(good))
	}
	for range 2 {
		f.expect(t, v6(good), xdpPass, Pass)
		f.expect(t, v6(bad), xdpDrop, DropDeny) // a miss of xpass: not remembered
		f.expect(t, v6(other), xdpPass, Pass)   // remembered in its place
	}
	if got := f.xpass(t, bad); got != lo64(other) {
		t.Fatalf("xpass: %#x, want %s's %#x", got, other, lo64(other))
	}
	// Swap: the remembered address is now the denied one.
	if err := f.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix(other + "/128")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		f.expect(t, v6(other), xdpDrop, DropDeny)
		f.expect(t, v6(bad), xdpPass, Pass)
	}
	// In place: the remembered address (bad) is added to the list.
	all := []netip.Prefix{netip.MustParsePrefix(bad + "/128"), netip.MustParsePrefix(other + "/128")}
	if _, err := f.EditDenyList(all, all[:1], nil); err != nil {
		t.Fatal(err)
	}
	f.expect(t, v6(bad), xdpDrop, DropDeny)
	f.expect(t, v6(good), xdpPass, Pass)
}

// TestSrcsLayoutChange: an entry written under another rt_srcs layout (here
// a planted xpass that names a denied address, with the current deny
// generation) is not trusted by a reopened filter: Open bumps the deny
// generation when the pinned rt_ctl names another layout, and only then.
func TestSrcsLayoutChange(t *testing.T) {
	needRoot(t)
	root := netnstest.PinRoot(t)
	open := func() *Filter {
		t.Helper()
		f, err := Open(root, &Options{MaxSources: 4096, testClock: true})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := open()
	if err := f.SetVIPs(testVIPs); err != nil {
		t.Fatal(err)
	}
	f.setClock(t, 1e12)
	v6 := func(src string) []byte {
		return pkt{src: src, dst: "2001:db8::10", proto: 6, sport: 1, dport: 80}.bytes()
	}
	const bad, good = "2001:db8:1:2::bad", "2001:db8:1:2::900d"
	if err := f.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix(bad + "/128")}); err != nil {
		t.Fatal(err)
	}
	f.expect(t, v6(good), xdpPass, Pass)
	f.setXpass(t, good, lo64(bad))
	f.expect(t, v6(bad), xdpPass, Pass) // the planted word is what XDP reads
	ctl := f.ctl
	ctl.SrcsLayout = 0
	if err := f.objs.RtCtl.Update(uint32(0), &ctl, 0); err != nil {
		t.Fatal(err)
	}
	gen := f.ctl.DenyGen
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = open()
	if f.ctl.DenyGen != gen+1 || f.ctl.SrcsLayout != srcsLayout {
		t.Fatalf("after a layout change: deny generation %d -> %d, layout %d", gen, f.ctl.DenyGen, f.ctl.SrcsLayout)
	}
	f.expect(t, v6(bad), xdpDrop, DropDeny)
	f.expect(t, v6(good), xdpPass, Pass)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = open()
	defer f.Remove()
	if f.ctl.DenyGen != gen+1 {
		t.Fatalf("same layout: deny generation %d -> %d", gen+1, f.ctl.DenyGen)
	}
	f.expect(t, v6(bad), xdpDrop, DropDeny)
}

// lo64 is an IPv6 address's last 64 bits as XDP loads them.
func lo64(a string) uint64 {
	b := netip.MustParseAddr(a).As16()
	return nativeUint64([8]byte(b[8:]))
}

// srcEntry finds the rt_srcs entry of a's /64 (or /32) and calls fn on its
// set and way, writing the set back if fn returns true.
func (f *Filter) srcEntry(t *testing.T, a string, fn func(s *rampartSrcSet, way int) bool) {
	t.Helper()
	key, set := srcKey(netip.MustParseAddr(a)), f.setOf(a)
	var s rampartSrcSet
	if err := f.objs.RtSrcs.Lookup(set, &s); err != nil {
		t.Fatal(err)
	}
	for i := range s.E {
		if s.E[i].Key == key {
			if fn(&s, i) {
				if err := f.objs.RtSrcs.Update(set, &s, 0); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
	}
	t.Fatalf("no rt_srcs entry for %s", a)
}

func (f *Filter) xpass(t *testing.T, a string) (v uint64) {
	f.srcEntry(t, a, func(s *rampartSrcSet, w int) bool { v = s.E[w].Xpass; return false })
	return v
}

func (f *Filter) setXpass(t *testing.T, a string, v uint64) {
	f.srcEntry(t, a, func(s *rampartSrcSet, w int) bool { s.E[w].Xpass = v; return true })
}

func with4(p pkt, dport uint16) []byte { p.dport = dport; return p.bytes() }

// passes runs a frame n times and returns how many passed; every other
// verdict must be drop.
func (f *Filter) passes(t testing.TB, frame []byte, n int, drop Reason) int {
	t.Helper()
	pass := 0
	for range n {
		a, r := f.run(t, frame)
		switch {
		case a == xdpPass && r == Pass:
			pass++
		case a == xdpDrop && r == drop:
		default:
			t.Fatalf("unexpected verdict %d %v", a, r)
		}
	}
	return pass
}

func TestPPSLimit(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	if err := f.SetLimits(Limits{PPS: 10, PPSBurst: 5}); err != nil {
		t.Fatal(err)
	}
	frame := tcp4("192.0.2.1", 0).bytes()
	other := tcp4("192.0.2.2", 0).bytes()
	now := uint64(1e12)
	steps := []struct {
		advance   uint64 // ns
		n, passes int
	}{
		{0, 8, 5},          // full burst
		{100e6, 2, 1},      // 0.1 s at 10/s = 1 token
		{250e6, 3, 2},      // 2.5 tokens: 2, leaving 0.5
		{50e6, 2, 1},       // 0.5 + 0.5
		{10e9, 9, 5},       // refilled only up to the burst
		{99_999_999, 1, 0}, // 0.999999990 tokens: not yet
		{10, 1, 1},         // exactly 1
	}
	for i, s := range steps {
		now += s.advance
		f.setClock(t, now)
		if got := f.passes(t, frame, s.n, DropPPS); got != s.passes {
			t.Fatalf("step %d: %d of %d passed, want %d", i, got, s.n, s.passes)
		}
	}
	// A clock step back refills nothing (the bucket restarts from the new
	// time); a later packet in the same tick only spends.
	now -= 5e9
	f.setClock(t, now)
	if got := f.passes(t, frame, 2, DropPPS); got != 0 {
		t.Fatalf("after a step back: %d passed, want 0", got)
	}
	now += 150e6
	f.setClock(t, now)
	if got := f.passes(t, frame, 3, DropPPS); got != 1 {
		t.Fatalf("0.15 s after the step back: %d passed, want 1", got)
	}
	if got := f.passes(t, other, 6, DropPPS); got != 5 { // per source
		t.Fatalf("second source: %d passed, want 5", got)
	}
	// A v6 /64 shares one bucket.
	a := pkt{src: "2001:db8:5:6::1", dst: "2001:db8::10", proto: 17, sport: 1, dport: 443}.bytes()
	b := pkt{src: "2001:db8:5:6::2", dst: "2001:db8::10", proto: 17, sport: 1, dport: 443}.bytes()
	if got := f.passes(t, a, 3, DropPPS) + f.passes(t, b, 3, DropPPS); got != 5 {
		t.Fatalf("one /64: %d passed, want 5", got)
	}
}

func TestSYNLimit(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	if err := f.SetLimits(Limits{PPS: 1000, PPSBurst: 1000, SYNRate: 2, SYNBurst: 3}); err != nil {
		t.Fatal(err)
	}
	syn, ack := tcp4("192.0.2.1", fSYN).bytes(), tcp4("192.0.2.1", fACK).bytes()
	synack := tcp4("192.0.2.1", fSYN|fACK).bytes()
	if got := f.passes(t, syn, 5, DropSYN); got != 3 {
		t.Fatalf("%d SYNs passed, want 3", got)
	}
	f.expect(t, ack, xdpPass, Pass)    // not a new connection
	f.expect(t, synack, xdpPass, Pass) // SYN+ACK is not a new connection either
	f.setClock(t, 1e12+500e6)          // 1 token at 2/s
	if got := f.passes(t, syn, 3, DropSYN); got != 1 {
		t.Fatalf("after 0.5 s: %d SYNs passed, want 1", got)
	}
}

func TestConnCap(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	if err := f.SetLimits(Limits{MaxConns: 2, SYNRate: 100, SYNBurst: 3}); err != nil {
		t.Fatal(err)
	}
	src := netip.MustParseAddr("192.0.2.1")
	syn, ack := tcp4("192.0.2.1", fSYN).bytes(), tcp4("192.0.2.1", fACK).bytes()
	f.setConns(t, src, 2)
	f.expect(t, syn, xdpDrop, DropConnCap)
	f.expect(t, ack, xdpPass, Pass) // established traffic is not capped
	f.setConns(t, src, 1)
	f.expect(t, syn, xdpPass, Pass)
	// The bound: handshakes in flight are not counted, so a source one below
	// its cap gets every SYN its SYN bucket allows (here the 2 tokens left).
	f.expect(t, syn, xdpPass, Pass)
	f.expect(t, syn, xdpDrop, DropSYN)
	// IPv6 sources are counted per /64.
	f.setConns(t, netip.MustParseAddr("2001:db8:7:7::1"), 2)
	f.expect(t, pkt{src: "2001:db8:7:7::2", dst: "2001:db8::10", proto: 6, sport: 1, dport: 80, flags: fSYN}.bytes(), xdpDrop, DropConnCap)
}

func (f *Filter) setOf(a string) uint32 {
	return uint32(mix(srcKey(netip.MustParseAddr(a))) >> (64 - bits.TrailingZeros32(f.objs.RtSrcs.MaxEntries())))
}

func TestNewSourcesAndTableFull(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 16}) // 4 sets of 4 ways
	addr := func(i int) string { return netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}).String() }
	src := func(i int) []byte { return tcp4(addr(i), 0).bytes() }
	known := tcp4("192.0.2.1", 0).bytes()

	// Global new-source limit: burst 10, then 1 per second.
	if err := f.SetLimits(Limits{PPS: 100, PPSBurst: 3, NewSources: 1, NewSourceBurst: 10}); err != nil {
		t.Fatal(err)
	}
	f.expect(t, known, xdpPass, Pass)
	var others []int // sources in the other sets: they cannot evict known
	for i := 0; len(others) < 40 && i < 1<<16; i++ {
		if f.setOf(addr(i)) != f.setOf("192.0.2.1") {
			others = append(others, i)
		}
	}
	for _, i := range others[:9] {
		f.expect(t, src(i), xdpPass, Pass)
	}
	for _, i := range others[9:] {
		f.expect(t, src(i), xdpDrop, DropNewSource)
	}
	f.expect(t, known, xdpPass, Pass) // sources with state are unaffected
	f.setClock(t, 1e12+1e9)
	f.expect(t, src(others[20]), xdpPass, Pass)
	f.expect(t, src(others[21]), xdpDrop, DropNewSource)

	// Without it, a new source takes the way of its set seen longest ago.
	if err := f.SetLimits(Limits{PPS: 100, PPSBurst: 3}); err != nil {
		t.Fatal(err)
	}
	var same []int // sources in known's set
	for i := 1000; len(same) < 8 && i < 1<<16; i++ {
		if f.setOf(addr(i)) == f.setOf("192.0.2.1") {
			same = append(same, i)
		}
	}
	now := uint64(2e12)
	tick := func() { now += 1e6; f.setClock(t, now) } // 1 ms: no token refill at 100/s
	tick()
	if got := f.passes(t, known, 5, DropPPS); got != 3 {
		t.Fatalf("known: %d passed, want 3", got)
	}
	for _, i := range same[:4] { // fill the set; known is now seen longest ago...
		tick()
		f.expect(t, src(i), xdpPass, Pass)
	}
	tick()
	f.expect(t, known, xdpPass, Pass) // ...so it was evicted: back with a full burst
	if got := f.passes(t, known, 3, DropPPS); got != 2 {
		t.Fatalf("re-admitted known: %d more passed, want 2", got)
	}
	for _, i := range same[4:7] { // known was seen last: three others go first
		tick()
		f.expect(t, src(i), xdpPass, Pass)
	}
	tick()
	f.expect(t, known, xdpDrop, DropPPS) // still has its (empty) bucket
	s, err := f.Stats()
	if err != nil || s.Sources > 16 || s.MaxSources != 16 {
		t.Fatalf("Stats %+v %v", s, err)
	}
}

// TestRestartKeepsControl: the control words and limits live in pinned maps
// that the program reads as globals; a reopened filter (a new program on
// the same pins) sees the VIPs, limits and bucket state the first one left,
// and a change made through it reaches the new program.
func TestRestartKeepsControl(t *testing.T) {
	needRoot(t)
	root := netnstest.PinRoot(t)
	o := &Options{MaxSources: 4096, testClock: true}
	f, err := Open(root, o)
	if err != nil {
		t.Fatal(err)
	}
	l := Limits{PPS: 1, PPSBurst: 2, MalformedOtherDrop: true}
	if err := errors.Join(f.SetVIPs(testVIPs), f.SetLimits(l)); err != nil {
		t.Fatal(err)
	}
	f.setClock(t, 1e12)
	frame := tcp4("192.0.2.1", 0).bytes()
	if got := f.passes(t, frame, 2, DropPPS); got != 2 {
		t.Fatalf("%d passed, want the burst of 2", got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(root, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Remove() })
	if got := f.Limits(); got != l {
		t.Fatalf("Limits() after reopening = %+v, want %+v", got, l)
	}
	f.expect(t, frame, xdpDrop, DropPPS) // the burst stays spent
	short := make([]byte, 14)            // Ethernet, IPv4, no IP header
	short[12] = 8
	f.expect(t, short, xdpDrop, DropMalformed)
	f.expect(t, with4(tcp4("192.0.2.1", 0), 22), xdpPass, PassNotVIP)
	if err := f.SetLimits(Limits{PPS: 1, PPSBurst: 3}); err != nil {
		t.Fatal(err)
	}
	if got := f.passes(t, frame, 4, DropPPS); got != 3 {
		t.Fatalf("after SetLimits on the reopened filter: %d passed, want 3", got)
	}
	f.expect(t, short, xdpPass, PassMalformed)
}

func TestGenerationResetsBuckets(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	l := Limits{PPS: 1, PPSBurst: 2}
	if err := f.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	frame := tcp4("192.0.2.1", 0).bytes()
	if got := f.passes(t, frame, 4, DropPPS); got != 2 {
		t.Fatalf("%d passed, want 2", got)
	}
	if err := f.SetLimits(l); err != nil { // same values, new generation
		t.Fatal(err)
	}
	if got := f.passes(t, frame, 4, DropPPS); got != 2 {
		t.Fatalf("after SetLimits: %d passed, want a fresh burst of 2", got)
	}
	l.PPSBurst = 5
	if err := f.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if got := f.passes(t, frame, 7, DropPPS); got != 5 {
		t.Fatalf("after raising the burst: %d passed, want 5", got)
	}
	if got := f.Limits(); got != (Limits{PPS: 1, PPSBurst: 5}) {
		t.Fatalf("Limits() = %+v", got)
	}
}

func TestReasonsMatchProgram(t *testing.T) {
	f := openTest(t, Options{MaxSources: 64})
	if n := f.objs.RtCounters.MaxEntries(); n != uint32(NumReasons) {
		t.Fatalf("rt_counters has %d entries, Go knows %d reasons", n, NumReasons)
	}
}

// TestVIPTables: six VIPs in one bucket (4 slots, the rest via the overflow
// hash), v6 too, and removal.
func TestVIPTables(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 1024})
	bucket := func(k rampartVip4Key) uint64 {
		return mix(uint64(k.Addr)|uint64(k.Port)<<32|uint64(k.Proto)<<48|1<<56) >> (64 - vipBits)
	}
	a := netip.MustParseAddr("203.0.113.50")
	want := bucket(vip4Key(a, 1, TCP))
	var ports []uint16
	for p := uint16(1); len(ports) < 7 && p < 65535; p++ {
		if bucket(vip4Key(a, p, TCP)) == want {
			ports = append(ports, p)
		}
	}
	vips := []VIP{{Addr: netip.MustParseAddr("2001:db8::10"), Port: 80, Proto: TCP}}
	for _, p := range ports[:6] {
		vips = append(vips, VIP{Addr: a, Port: p, Proto: TCP, Socket: NoSocket})
	}
	if err := f.SetVIPs(vips); err != nil {
		t.Fatal(err)
	}
	frame := func(p uint16) []byte {
		return pkt{src: "192.0.2.1", dst: "203.0.113.50", proto: 6, sport: 1, dport: p}.bytes()
	}
	for _, p := range ports[:6] {
		f.expect(t, frame(p), xdpPass, Pass)
	}
	f.expect(t, frame(ports[6]), xdpPass, PassNotVIP) // same bucket, not a VIP
	f.expect(t, tcp4("192.0.2.1", 0).bytes(), xdpPass, PassNotVIP)
	v6 := pkt{src: "2001:db8:1::1", dst: "2001:db8::10", proto: 6, sport: 1, dport: 80}.bytes()
	f.expect(t, v6, xdpPass, Pass)
	if err := f.SetVIPs(vips[2:]); err != nil {
		t.Fatal(err)
	}
	f.expect(t, v6, xdpPass, PassNotVIP)
	f.expect(t, frame(ports[0]), xdpPass, PassNotVIP)
	f.expect(t, frame(ports[5]), xdpPass, Pass)
}
