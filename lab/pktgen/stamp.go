package pktgen

import (
	"encoding/binary"
	"net/netip"
)

// stamp rewrites a frame built from a Spec with another source address and
// source port, updating the checksums from sums taken once over the fixed
// fields (the per-packet cost is the variable words only).
type stamp struct {
	frame            []byte // the Spec's frame with the variable fields and checksums zero
	v4, udp          bool
	srcOff, sportOff int
	ipCsum, l4Csum   int    // offsets of the checksums (ipCsum unused for IPv6)
	ipBase, l4Base   uint64 // sums of the fixed fields
	srcLen           int
	fixedSport       bool
	sport            uint16
}

func newStamp(s Spec) (*stamp, error) {
	if s.Dst.Is4() {
		s.Src = netip.IPv4Unspecified()
	} else {
		s.Src = netip.IPv6Unspecified()
	}
	sport := s.SrcPort
	s.SrcPort = 0
	f, err := AppendFrame(nil, s)
	if err != nil {
		return nil, err
	}
	t := &stamp{frame: f, v4: s.Dst.Is4(), udp: s.Kind == UDP, sport: sport, fixedSport: sport != 0}
	l4 := ethLen + ip6Len
	t.srcOff, t.srcLen = ethLen+8, 16
	if t.v4 {
		l4 = ethLen + ip4Len
		t.srcOff, t.srcLen = ethLen+12, 4
		t.ipCsum = ethLen + 10
		f[t.ipCsum], f[t.ipCsum+1] = 0, 0
		t.ipBase = sum(f[ethLen:l4], 0)
	}
	t.sportOff = l4
	t.l4Csum = l4 + l4CsumOff(s.Kind)
	f[t.l4Csum], f[t.l4Csum+1] = 0, 0
	proto := byte(protoTC)
	if t.udp {
		proto = protoUD
	}
	dst := s.Dst.AsSlice()
	t.l4Base = sum(f[l4:], pseudo(nil, dst, proto, len(f)-l4))
	return t, nil
}

// write stamps buf (len(t.frame) bytes, holding t.frame or an earlier
// stamp of it) as packet number n: the next source address from src, and
// the Spec's source port or, when that was 0, 49152 + n mod 16384 (the
// dynamic range).
func (t *stamp) write(buf []byte, src *Sources, n uint64) {
	src.put(buf[t.srcOff : t.srcOff+t.srcLen])
	sport := t.sport
	if !t.fixedSport {
		sport = 49152 + uint16(n%16384)
	}
	binary.BigEndian.PutUint16(buf[t.sportOff:], sport)
	s := sum(buf[t.srcOff:t.srcOff+t.srcLen], 0)
	if t.v4 {
		binary.BigEndian.PutUint16(buf[t.ipCsum:], ^fold(t.ipBase+s))
	}
	c := ^fold(t.l4Base + s + uint64(sport))
	if c == 0 && t.udp {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(buf[t.l4Csum:], c)
}
