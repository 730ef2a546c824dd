package pktgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"testing"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

func randSpec(r *rand.Rand) Spec {
	s := Spec{DstMAC: macA, SrcMAC: macB, Kind: Kind(1 + r.IntN(3)),
		SrcPort: uint16(r.Uint32()), DstPort: uint16(r.Uint32()), Seq: r.Uint32(), Ack: r.Uint32()}
	if r.IntN(2) == 0 {
		var a, b [4]byte
		binary.BigEndian.PutUint32(a[:], r.Uint32())
		binary.BigEndian.PutUint32(b[:], r.Uint32())
		s.Src, s.Dst = netip.AddrFrom4(a), netip.AddrFrom4(b)
	} else {
		var a, b [16]byte
		for i := range 16 {
			a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		a[0], b[0] = 0xfd, 0x20 // never an IPv4-mapped address
		s.Src, s.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
	}
	s.Payload = make([]byte, r.IntN(80))
	for i := range s.Payload {
		s.Payload[i] = byte(r.Uint32())
	}
	return s
}

// same says whether p is what s describes.
func same(s Spec, p Packet) bool {
	ack := uint32(0)
	if s.Kind == ACK {
		ack = s.Ack
	}
	ok := bytes.Equal(p.DstMAC, s.DstMAC) && bytes.Equal(p.SrcMAC, s.SrcMAC) && p.Src == s.Src && p.Dst == s.Dst &&
		p.Kind() == s.Kind && p.SrcPort == s.SrcPort && p.DstPort == s.DstPort && bytes.Equal(p.Payload, s.Payload)
	if s.Kind != UDP {
		ok = ok && p.Seq == s.Seq && p.Ack == ack
	}
	return ok
}

func TestFrameRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		s := randSpec(r)
		f, err := AppendFrame(nil, s)
		if err != nil {
			t.Fatalf("spec %d %+v: %v", i, s, err)
		}
		if len(f) != s.FrameLen() {
			t.Fatalf("spec %d: frame of %d bytes, FrameLen %d", i, len(f), s.FrameLen())
		}
		p, err := Parse(f)
		if err != nil {
			t.Fatalf("spec %d %+v: parse: %v", i, s, err)
		}
		if !same(s, p) {
			t.Fatalf("spec %d: %+v parsed as %+v", i, s, p)
		}
		// Ethernet padding after the IP packet is ignored.
		if p2, err := Parse(append(f, 0, 0, 0, 0)); err != nil || !same(s, p2) {
			t.Fatalf("spec %d with padding: %+v, %v", i, p2, err)
		}
		// Any one bit flipped in the IP header or above is an error
		// (a checksum or a length), never a different packet.
		bit := ethLen*8 + r.IntN((len(f)-ethLen)*8)
		if by := bit/8 - ethLen; s.Dst.Is6() && (by == 0 && bit%8 < 4 || by >= 1 && by < 4 || by == 7) {
			continue // IPv6 traffic class, flow label, hop limit: no checksum covers them
		}
		g := bytes.Clone(f)
		g[bit/8] ^= 1 << (bit % 8)
		if p3, err := Parse(g); err == nil {
			t.Fatalf("spec %d: bit %d flipped parsed as %+v", i, bit, p3)
		}
	}
}

// A known frame: IPv4 UDP whose checksums were worked out by hand
// (RFC 1071 arithmetic) — catches an error shared by encoder and parser.
func TestFrameKnownChecksums(t *testing.T) {
	s := Spec{DstMAC: macA, SrcMAC: macB, Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("203.0.113.10"),
		Kind: UDP, SrcPort: 1000, DstPort: 53, Payload: []byte{1, 2, 3}}
	f, err := AppendFrame(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	// IPv4 header words: 4500 001f 0000 4000 4011 0000 c000 0201 cb00 710a
	// sum = 0x2c33b → 0xc33d; checksum 0x3cc2.
	if got := binary.BigEndian.Uint16(f[ethLen+10:]); got != 0x3cc2 {
		t.Errorf("IPv4 header checksum %#04x, want 0x3cc2", got)
	}
	// Pseudo header c000+0201+cb00+710a+0011+000b = 0x1fe27, UDP
	// 03e8+0035+000b+0000+0102+0300 = 0x082a: sum 0x20651 → 0x0653;
	// checksum 0xf9ac.
	if got := binary.BigEndian.Uint16(f[ethLen+ip4Len+6:]); got != 0xf9ac {
		t.Errorf("UDP checksum %#04x, want 0xf9ac", got)
	}
}

func TestFrameSpecErrors(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	for _, s := range []Spec{
		{DstMAC: macA, SrcMAC: macB, Src: v4, Dst: v6, Kind: SYN},
		{DstMAC: macA, SrcMAC: macB, Src: v4, Dst: v4},
		{DstMAC: macA[:5], SrcMAC: macB, Src: v4, Dst: v4, Kind: UDP},
		{DstMAC: macA, SrcMAC: macB, Src: netip.MustParseAddr("::ffff:192.0.2.1"), Dst: netip.MustParseAddr("::ffff:192.0.2.2"), Kind: UDP},
		{DstMAC: macA, SrcMAC: macB, Src: v6, Dst: v6, Kind: UDP, Payload: make([]byte, 70000)},
	} {
		if _, err := AppendFrame(nil, s); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}

func TestParseChecksumError(t *testing.T) {
	s := Spec{DstMAC: macA, SrcMAC: macB, Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"), Kind: SYN, DstPort: 80}
	f, _ := AppendFrame(nil, s)
	f[len(f)-1] ^= 0x40 // urgent pointer
	if _, err := Parse(f); !errors.Is(err, ErrChecksum) {
		t.Fatalf("corrupted TCP: %v, want ErrChecksum", err)
	}
	// ParseHeaders takes it (a frame whose checksum was offloaded).
	if p, err := ParseHeaders(f); err != nil || !same(s, p) {
		t.Fatalf("ParseHeaders: %+v, %v", p, err)
	}
}

// The per-packet stamp gives exactly the frame AppendFrame builds for the
// same source and port.
func TestStampEqualsAppendFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		s := randSpec(r)
		if r.IntN(3) == 0 {
			s.SrcPort = 0
		}
		st, err := newStamp(s)
		if err != nil {
			t.Fatal(err)
		}
		pre := netip.PrefixFrom(s.Src, r.IntN(s.Src.BitLen()+1))
		seq, start, seed := r.IntN(2) == 0, r.Uint64(), r.Uint64()
		src, err := NewSources(pre, seq, start, 1, seed)
		if err != nil {
			t.Fatal(err)
		}
		expect, _ := NewSources(pre, seq, start, 1, seed) // the same addresses
		buf := bytes.Clone(st.frame)
		for n := range uint64(4) { // stamping over an earlier stamp
			want := s
			want.Src = expect.Next()
			if s.SrcPort == 0 {
				want.SrcPort = 49152 + uint16(n%16384)
			}
			st.write(buf, src, n)
			f, _ := AppendFrame(nil, want)
			if !bytes.Equal(buf, f) {
				t.Fatalf("spec %d packet %d: stamp\n%x\nAppendFrame\n%x", i, n, buf, f)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		fr, _ := AppendFrame(nil, randSpec(r))
		f.Add(fr)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, err := Parse(frame)
		if h, herr := ParseHeaders(frame); err == nil && (herr != nil || !reflect.DeepEqual(p, h)) {
			t.Fatalf("Parse took the frame, ParseHeaders gave %+v, %v", h, herr)
		}
		if err != nil {
			return
		}
		k := p.Kind()
		if k == 0 {
			return // TCP with other flags: parsed, not something we build
		}
		// Re-encoding what was parsed parses to the same packet.
		s := Spec{DstMAC: p.DstMAC, SrcMAC: p.SrcMAC, Src: p.Src, Dst: p.Dst, Kind: k,
			SrcPort: p.SrcPort, DstPort: p.DstPort, Seq: p.Seq, Ack: p.Ack, Payload: p.Payload}
		g, err := AppendFrame(nil, s)
		if err != nil {
			if s.Src.Is4In6() || s.Dst.Is4In6() || len(s.Payload) > 0xffff-ip6Len-tcpLen {
				return
			}
			t.Fatalf("re-encode %+v: %v", s, err)
		}
		q, err := Parse(g)
		if err != nil || !same(s, q) {
			t.Fatalf("re-encoded %+v parsed as %+v, %v", s, q, err)
		}
	})
}
