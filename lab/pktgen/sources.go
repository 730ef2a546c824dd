package pktgen

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
)

// Sources picks source addresses inside a prefix: at random (uniform over
// the host bits) or sequentially (the prefix's first address, then the
// next, wrapping around; with more than 64 host bits only the last 64
// count up).
type Sources struct {
	prefix     netip.Prefix
	v4         bool
	hostBits   int
	hi, lo     uint64 // the prefix's address (IPv4 in the low 32 bits of lo)
	sequential bool
	next, step uint64
	rng        *rand.Rand
}

// NewSources picks from p. Sequential sources start at the start-th
// address and advance by step (workers share a prefix with start = their
// index, step = their number); random ones are drawn from a generator
// seeded with seed.
func NewSources(p netip.Prefix, sequential bool, start, step, seed uint64) (*Sources, error) {
	if !p.IsValid() || p.Addr().Is4In6() {
		return nil, fmt.Errorf("source prefix %v: not an IPv4 or IPv6 prefix", p)
	}
	if step == 0 {
		step = 1
	}
	p = p.Masked()
	s := &Sources{prefix: p, v4: p.Addr().Is4(), sequential: sequential, next: start, step: step,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	a := p.Addr().As16()
	s.hi, s.lo = binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	s.hostBits = p.Addr().BitLen() - p.Bits()
	return s, nil
}

// Prefix is the prefix the sources come from.
func (s *Sources) Prefix() netip.Prefix { return s.prefix }

// Next returns the next source address.
func (s *Sources) Next() netip.Addr {
	var b [16]byte
	if s.v4 {
		s.put(b[:4])
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	s.put(b[:])
	return netip.AddrFrom16(b)
}

// put writes the next source address into b (4 or 16 bytes).
func (s *Sources) put(b []byte) {
	var hostHi, hostLo uint64
	if s.sequential {
		hostLo = s.next
		s.next += s.step
	} else {
		hostLo, hostHi = s.rng.Uint64(), s.rng.Uint64()
	}
	hi, lo := s.hi, s.lo
	switch {
	case s.hostBits == 0:
	case s.hostBits < 64:
		lo |= hostLo & (1<<s.hostBits - 1)
	case s.hostBits == 64:
		lo |= hostLo
	default: // IPv6, more than 64 host bits
		lo = hostLo
		if !s.sequential {
			hi |= hostHi & (1<<(s.hostBits-64) - 1)
		}
	}
	if s.v4 {
		binary.BigEndian.PutUint32(b, uint32(lo))
		return
	}
	binary.BigEndian.PutUint64(b, hi)
	binary.BigEndian.PutUint64(b[8:], lo)
}
