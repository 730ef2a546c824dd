package deny

import (
	"encoding/binary"
	"net/netip"
)

// u128 is an address as two big-endian halves. IPv4 addresses sit in the
// top 32 bits of hi, so both families share one lookup.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func keyOf(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{hi: uint64(binary.BigEndian.Uint32(b[:])) << 32}
	}
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func (a u128) addr(v4 bool) netip.Addr {
	if v4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(a.hi>>32))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return netip.AddrFrom16(b)
}

// contains reports whether k lies in the prefix start/bits (start masked).
// Shifts of 64 give 0 in Go, so bits 0 contains everything.
func contains(start u128, bits uint8, k u128) bool {
	if bits <= 64 {
		return (start.hi^k.hi)>>(64-bits) == 0
	}
	return start.hi == k.hi && (start.lo^k.lo)>>(128-bits) == 0
}

// prefixSet finds the longest unexpired prefix containing an address.
//
// Keys are the prefixes' first addresses, sorted by address then length.
// CIDRs nest or are disjoint, so every prefix containing k is the last
// prefix starting at or before k, or one of its ancestors (the prefixes
// containing it): a binary search and a short walk up parent links, longest
// first. A table of the top 16 address bits narrows the search. Memory is
// 40 bytes a prefix plus 256 KiB; nothing is allocated on lookup.
type prefixSet struct {
	keys  []u128
	meta  []pmeta
	first []int32 // first[b]: index of the first key whose top 16 bits are >= b
}

type pmeta struct {
	exp    int64 // unix seconds; matches while now < exp
	parent int32 // the next shorter prefix containing this one, or -1
	reason int32
	bits   uint8
}

// finish links parents and builds the top-bits table; keys were added in
// canonical order.
func (s *prefixSet) finish() {
	if len(s.keys) == 0 {
		return
	}
	stack := make([]int32, 0, 129)
	for i := range s.keys {
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			if contains(s.keys[top], s.meta[top].bits, s.keys[i]) {
				break
			}
			stack = stack[:len(stack)-1]
		}
		s.meta[i].parent = -1
		if len(stack) > 0 {
			s.meta[i].parent = stack[len(stack)-1]
		}
		stack = append(stack, int32(i))
	}
	s.first = make([]int32, 1<<16+1)
	j := 0
	for b := range s.first {
		for j < len(s.keys) && int(s.keys[j].hi>>48) < b {
			j++
		}
		s.first[b] = int32(j)
	}
}

func (s *prefixSet) lookup(k u128, now int64) (reason int32, ok bool) {
	if len(s.first) == 0 {
		return 0, false
	}
	b := k.hi >> 48
	lo, hi := s.first[b], s.first[b+1]
	for lo < hi { // first key > k
		m := int32(uint32(lo+hi) >> 1)
		if k.less(s.keys[m]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	for i := lo - 1; i >= 0; i = s.meta[i].parent {
		m := &s.meta[i]
		if now < m.exp && contains(s.keys[i], m.bits, k) {
			return m.reason, true
		}
	}
	return 0, false
}

func (s *prefixSet) appendLive(out []netip.Prefix, v4 bool, now int64) []netip.Prefix {
	for i, k := range s.keys {
		if now < s.meta[i].exp {
			out = append(out, netip.PrefixFrom(k.addr(v4), int(s.meta[i].bits)))
		}
	}
	return out
}
