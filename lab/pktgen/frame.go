// Package pktgen generates Ethernet frames (IPv4 or IPv6 carrying a TCP SYN,
// a TCP ACK or a UDP datagram, with correct checksums) from sources spread
// over a CIDR and sends them on an interface through an AF_PACKET socket,
// paced or as fast as the socket takes them. The lab's flood drill uses it;
// `rampart lab pktgen` runs it by hand.
package pktgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Kind is what a frame carries.
type Kind uint8

const (
	SYN Kind = iota + 1 // TCP, SYN set, nothing else
	ACK                 // TCP, ACK set, nothing else
	UDP                 // UDP datagram
)

func (k Kind) String() string {
	switch k {
	case SYN:
		return "syn"
	case ACK:
		return "ack"
	case UDP:
		return "udp"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind reads "syn", "ack" or "udp".
func ParseKind(s string) (Kind, error) {
	for _, k := range []Kind{SYN, ACK, UDP} {
		if s == k.String() {
			return k, nil
		}
	}
	return 0, fmt.Errorf("frame kind %q: want syn, ack or udp", s)
}

const (
	ethLen  = 14
	ip4Len  = 20
	ip6Len  = 40
	tcpLen  = 20
	udpLen  = 8
	protoTC = 6
	protoUD = 17

	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd

	flagSYN = 0x02
	flagACK = 0x10
	flagFIN = 0x01
	flagRST = 0x04
)

// Spec describes one frame. Src and Dst are of the same family.
type Spec struct {
	DstMAC, SrcMAC   net.HardwareAddr
	Src, Dst         netip.Addr
	Kind             Kind
	SrcPort, DstPort uint16
	Seq, Ack         uint32 // TCP only; Ack is sent only with ACK
	Payload          []byte
}

// FrameLen is the length of the frame s describes.
func (s Spec) FrameLen() int {
	n := ethLen + ip4Len
	if s.Dst.Is6() {
		n = ethLen + ip6Len
	}
	if s.Kind == UDP {
		return n + udpLen + len(s.Payload)
	}
	return n + tcpLen + len(s.Payload)
}

func (s Spec) check() error {
	if len(s.DstMAC) != 6 || len(s.SrcMAC) != 6 {
		return fmt.Errorf("frame spec: MAC addresses must be 6 bytes (dst %q, src %q)", s.DstMAC, s.SrcMAC)
	}
	if !s.Src.IsValid() || !s.Dst.IsValid() || s.Src.Is4() != s.Dst.Is4() || s.Src.Is4In6() || s.Dst.Is4In6() {
		return fmt.Errorf("frame spec: source %v and destination %v must be addresses of one family", s.Src, s.Dst)
	}
	if s.Kind != SYN && s.Kind != ACK && s.Kind != UDP {
		return fmt.Errorf("frame spec: %v", s.Kind)
	}
	if max := 0xffff - ip6Len - tcpLen; len(s.Payload) > max {
		return fmt.Errorf("frame spec: payload of %d bytes is above %d", len(s.Payload), max)
	}
	return nil
}

// AppendFrame appends the frame s describes to b: Ethernet, IPv4 (DF, TTL
// 64, no options) or IPv6 (hop limit 64, no extension headers), then TCP
// (window 65535, no options) or UDP, checksums filled in.
func AppendFrame(b []byte, s Spec) ([]byte, error) {
	if err := s.check(); err != nil {
		return b, err
	}
	b = append(b, s.DstMAC...)
	b = append(b, s.SrcMAC...)
	l4 := tcpLen
	proto := byte(protoTC)
	if s.Kind == UDP {
		l4, proto = udpLen, protoUD
	}
	l4 += len(s.Payload)
	src, dst := s.Src.AsSlice(), s.Dst.AsSlice()
	if s.Dst.Is4() {
		b = binary.BigEndian.AppendUint16(b, etherIPv4)
		ip := len(b)
		b = append(b, 0x45, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(ip4Len+l4))
		b = append(b, 0, 0, 0x40, 0, 64, proto, 0, 0) // id 0, DF, TTL 64, checksum
		b = append(b, src...)
		b = append(b, dst...)
		binary.BigEndian.PutUint16(b[ip+10:], ^fold(sum(b[ip:ip+ip4Len], 0)))
	} else {
		b = binary.BigEndian.AppendUint16(b, etherIPv6)
		b = append(b, 0x60, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, uint16(l4))
		b = append(b, proto, 64)
		b = append(b, src...)
		b = append(b, dst...)
	}
	l4Start := len(b)
	b = binary.BigEndian.AppendUint16(b, s.SrcPort)
	b = binary.BigEndian.AppendUint16(b, s.DstPort)
	if s.Kind == UDP {
		b = binary.BigEndian.AppendUint16(b, uint16(l4))
		b = append(b, 0, 0)
	} else {
		flags, ack := byte(flagSYN), uint32(0)
		if s.Kind == ACK {
			flags, ack = flagACK, s.Ack
		}
		b = binary.BigEndian.AppendUint32(b, s.Seq)
		b = binary.BigEndian.AppendUint32(b, ack)
		b = append(b, tcpLen/4<<4, flags, 0xff, 0xff, 0, 0, 0, 0)
	}
	b = append(b, s.Payload...)
	c := ^fold(sum(b[l4Start:], pseudo(src, dst, proto, l4)))
	if c == 0 && s.Kind == UDP {
		c = 0xffff // 0 means "no checksum" in UDP
	}
	binary.BigEndian.PutUint16(b[l4Start+l4CsumOff(s.Kind):], c)
	return b, nil
}

func l4CsumOff(k Kind) int {
	if k == UDP {
		return 6
	}
	return 16
}

// sum adds b as big-endian 16-bit words (an odd last byte padded with
// zero) to s, without folding.
func sum(b []byte, s uint64) uint64 {
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		s += v>>48 + v>>32&0xffff + v>>16&0xffff + v&0xffff
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return s
}

// fold reduces a sum to 16 bits in ones' complement arithmetic.
func fold(s uint64) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// pseudo is the sum of the IPv4 or IPv6 pseudo header.
func pseudo(src, dst []byte, proto byte, l4 int) uint64 {
	return sum(dst, sum(src, uint64(proto)+uint64(l4)))
}

// Packet is a parsed frame.
type Packet struct {
	DstMAC, SrcMAC   net.HardwareAddr
	Src, Dst         netip.Addr
	Proto            uint8 // 6 (TCP) or 17 (UDP)
	SrcPort, DstPort uint16
	Flags            uint8 // TCP flags
	Seq, Ack         uint32
	Payload          []byte // aliases the frame
}

// Kind is SYN, ACK or UDP when the packet is one of those, else 0.
func (p Packet) Kind() Kind {
	switch {
	case p.Proto == protoUD:
		return UDP
	case p.Proto == protoTC && p.Flags == flagSYN:
		return SYN
	case p.Proto == protoTC && p.Flags == flagACK:
		return ACK
	}
	return 0
}

// ErrChecksum is wrapped by Parse's errors for a wrong checksum.
var ErrChecksum = errors.New("bad checksum")

// Parse reads an Ethernet frame carrying IPv4 (any options, no fragments)
// or IPv6 (no extension headers) and TCP or UDP, and verifies the IPv4
// header checksum and the TCP or UDP checksum (a UDP checksum of 0 is
// accepted for IPv4 only). Bytes after the IP packet (Ethernet padding)
// are ignored.
func Parse(frame []byte) (Packet, error) { return parse(frame, true) }

// ParseHeaders is Parse without the TCP/UDP checksum check: for frames a
// local stack sent over veth, captured before anything filled in their
// checksum (offloaded: the field holds only the pseudo header's sum).
func ParseHeaders(frame []byte) (Packet, error) { return parse(frame, false) }

func parse(frame []byte, verify bool) (Packet, error) {
	var p Packet
	if len(frame) < ethLen {
		return p, fmt.Errorf("frame of %d bytes: shorter than an Ethernet header", len(frame))
	}
	p.DstMAC, p.SrcMAC = net.HardwareAddr(frame[0:6]), net.HardwareAddr(frame[6:12])
	var l4 []byte
	var src, dst []byte
	switch et := binary.BigEndian.Uint16(frame[12:]); et {
	case etherIPv4:
		ip := frame[ethLen:]
		if len(ip) < ip4Len || ip[0]>>4 != 4 {
			return p, fmt.Errorf("IPv4 header: truncated (%d bytes) or version %d", len(ip), versionOf(ip))
		}
		hl, tl := int(ip[0]&0xf)*4, int(binary.BigEndian.Uint16(ip[2:]))
		if hl < ip4Len || tl < hl || tl > len(ip) {
			return p, fmt.Errorf("IPv4 header: header length %d, total length %d, %d bytes", hl, tl, len(ip))
		}
		if fold(sum(ip[:hl], 0)) != 0xffff {
			return p, fmt.Errorf("IPv4 header: %w", ErrChecksum)
		}
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return p, errors.New("IPv4 header: a fragment")
		}
		p.Proto, src, dst, l4 = ip[9], ip[12:16], ip[16:20], ip[hl:tl]
	case etherIPv6:
		ip := frame[ethLen:]
		if len(ip) < ip6Len || ip[0]>>4 != 6 {
			return p, fmt.Errorf("IPv6 header: truncated (%d bytes) or version %d", len(ip), versionOf(ip))
		}
		pl := int(binary.BigEndian.Uint16(ip[4:]))
		if pl > len(ip)-ip6Len {
			return p, fmt.Errorf("IPv6 header: payload length %d, %d bytes", pl, len(ip)-ip6Len)
		}
		p.Proto, src, dst, l4 = ip[6], ip[8:24], ip[24:40], ip[ip6Len:ip6Len+pl]
	default:
		return p, fmt.Errorf("ethertype %#04x: not IPv4 or IPv6", et)
	}
	p.Src, _ = netip.AddrFromSlice(src)
	p.Dst, _ = netip.AddrFromSlice(dst)
	switch p.Proto {
	case protoTC:
		if len(l4) < tcpLen || int(l4[12]>>4)*4 < tcpLen || int(l4[12]>>4)*4 > len(l4) {
			return p, fmt.Errorf("TCP header: %d bytes, data offset %d", len(l4), l4Offset(l4))
		}
		p.Seq, p.Ack = binary.BigEndian.Uint32(l4[4:]), binary.BigEndian.Uint32(l4[8:])
		p.Flags = l4[13]
		p.Payload = l4[int(l4[12]>>4)*4:]
	case protoUD:
		if len(l4) < udpLen || int(binary.BigEndian.Uint16(l4[4:])) != len(l4) {
			return p, fmt.Errorf("UDP header: %d bytes, length field %d", len(l4), udpLength(l4))
		}
		p.Payload = l4[udpLen:]
		if verify && binary.BigEndian.Uint16(l4[6:]) == 0 && p.Src.Is6() {
			return p, fmt.Errorf("UDP over IPv6 without a checksum: %w", ErrChecksum)
		}
	default:
		return p, fmt.Errorf("IP protocol %d: not TCP or UDP", p.Proto)
	}
	noSum := !verify || p.Proto == protoUD && binary.BigEndian.Uint16(l4[6:]) == 0
	if !noSum && fold(sum(l4, pseudo(src, dst, p.Proto, len(l4)))) != 0xffff {
		return p, fmt.Errorf("%s from %v to %v: %w", protoName(p.Proto), p.Src, p.Dst, ErrChecksum)
	}
	p.SrcPort, p.DstPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	return p, nil
}

func versionOf(ip []byte) int {
	if len(ip) == 0 {
		return -1
	}
	return int(ip[0] >> 4)
}

func l4Offset(l4 []byte) int {
	if len(l4) < 13 {
		return -1
	}
	return int(l4[12]>>4) * 4
}

func udpLength(l4 []byte) int {
	if len(l4) < 6 {
		return -1
	}
	return int(binary.BigEndian.Uint16(l4[4:]))
}

func protoName(p uint8) string {
	if p == protoTC {
		return "TCP"
	}
	return "UDP"
}
