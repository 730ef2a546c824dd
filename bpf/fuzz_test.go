package bpf

import (
	"bytes"
	"net/netip"
	"testing"
)

// FuzzXDP runs arbitrary frames through the program: it never fails, moves
// exactly one counter, and never drops a frame that does not carry a VIP
// address as its IPv4/IPv6 destination (under the default malformed policy):
// management traffic is never touched.
func FuzzXDP(f *testing.F) {
	for _, p := range []pkt{
		tcp4("192.0.2.1", fSYN), tcp4("192.0.2.1", fSYN|fFIN),
		{src: "192.0.2.1", dst: "198.51.100.1", proto: 6, sport: 1, dport: 22, vlans: []uint16{0x8100}},
		{src: "192.0.2.1", dst: "203.0.113.10", proto: 17, sport: 1, dport: 443, vlans: []uint16{0x88a8, 0x8100}},
		{src: "2001:db8:1::1", dst: "2001:db8::10", proto: 6, sport: 1, dport: 80, ext: []uint8{0}},
		{src: "2001:db8:1::1", dst: "2001:db8::11", proto: 17, sport: 1, dport: 53, frag: true},
		{src: "192.0.2.1", dst: "203.0.113.10", proto: 6, sport: 1, dport: 80, ipOpts: 8, truncate: 3},
	} {
		f.Add(p.bytes())
	}
	fl := openVIPs(f, Options{MaxSources: 1024})
	if err := fl.SetLimits(Limits{PPS: 5, SYNRate: 2, MaxConns: 1, NewSources: 50}); err != nil {
		f.Fatal(err)
	}
	if err := fl.ReplaceDenyList([]netip.Prefix{netip.MustParsePrefix("192.0.2.0/28"), netip.MustParsePrefix("2001:db8:1::/48")}); err != nil {
		f.Fatal(err)
	}
	v4, v6 := netip.MustParseAddr("203.0.113.10").As4(), netip.MustParseAddr("2001:db8::10").As16()
	f.Fuzz(func(t *testing.T, frame []byte) {
		if len(frame) < 14 || len(frame) > 1500 { // test runs take 14 bytes .. about a page
			return
		}
		action, _ := fl.run(t, frame)
		vip := false
		for _, off := range []int{14, 18, 22} {
			if len(frame) >= off+20 && bytes.Equal(frame[off+16:off+20], v4[:]) ||
				len(frame) >= off+40 && bytes.Equal(frame[off+24:off+40], v6[:]) {
				vip = true
			}
		}
		if action != xdpPass && (action != xdpDrop || !vip) {
			t.Fatalf("action %d for a frame without a VIP destination: %x", action, frame)
		}
	})
}
