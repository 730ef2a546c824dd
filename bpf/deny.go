package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
)

const (
	denyMax   = 4 << 20 // DENY_MAX in rampart.c: trie entries per family
	denyValue = 1       // DENY
	splitMark = 2       // SPLIT
)

// ent is one trie entry: key (prefix length, then address) and value.
type ent[K any] struct {
	k K
	v uint8
}

// trie is the live LPM trie of one family as this process last wrote it.
type trie[K any] struct {
	m    *ebpf.Map
	ents []ent[K] // sorted by key: prefix length first, so a full load inserts short prefixes first (fastest)
}

// ReplaceDenyList makes prefixes the deny list, with no moment where an
// address denied by both the old and the new list is passed:
//   - a small change (at most a quarter of the list plus 4096 entries)
//     against the list this process installed is applied in place: new
//     entries are written first, then removed ones deleted;
//   - otherwise (and on the first call after Open) the family's entries go
//     into a fresh LPM trie, which replaces the live one in one update of the
//     outer map-in-map slot. The kernel waits for running programs before that
//     update returns, so the old trie is in force until the new one is whole.
//
// Then the deny generation is bumped, invalidating verdicts cached per source.
// IPv6 prefixes longer than /64 also put a SPLIT mark on their /64 (unless a
// prefix of /64 or shorter covers it), so per-/64 caching stays exact.
func (f *Filter) ReplaceDenyList(prefixes []netip.Prefix) error {
	var k4 []uint64
	var e6 []ent[[20]byte]
	var long []netip.Prefix
	short := map[int]map[netip.Prefix]bool{} // IPv6 prefixes up to /64, by length
	for _, p := range prefixes {
		if !p.IsValid() {
			return fmt.Errorf("bpf: invalid deny prefix %v", p)
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if p.Addr().Is4() { // sorted as integers: much faster than by bytes
			a := p.Addr().As4()
			k4 = append(k4, uint64(p.Bits())<<32|uint64(binary.BigEndian.Uint32(a[:])))
			continue
		}
		e6 = append(e6, ent[[20]byte]{key6(p), denyValue})
		if p.Bits() > 64 {
			long = append(long, p)
		} else {
			if short[p.Bits()] == nil {
				short[p.Bits()] = map[netip.Prefix]bool{}
			}
			short[p.Bits()][p] = true
		}
	}
	for _, p := range long {
		p64 := netip.PrefixFrom(p.Addr(), 64).Masked()
		covered := false
		for bits, set := range short {
			if set[netip.PrefixFrom(p64.Addr(), bits).Masked()] {
				covered = true
				break
			}
		}
		if !covered {
			e6 = append(e6, ent[[20]byte]{key6(p64), splitMark})
		}
	}
	slices.Sort(k4)
	k4 = slices.Compact(k4)
	e4 := make([]ent[[8]byte], len(k4))
	for i, x := range k4 {
		binary.NativeEndian.PutUint32(e4[i].k[:], uint32(x>>32))
		binary.BigEndian.PutUint32(e4[i].k[4:], uint32(x))
		e4[i].v = denyValue
	}
	e6 = sortedUnique(e6, func(a, b [20]byte) int { return bytes.Compare(a[:], b[:]) })
	n4, n6 := len(e4), 0
	for _, e := range e6 {
		if e.v == denyValue {
			n6++
		}
	}
	if len(e4) > denyMax || len(e6) > denyMax {
		return fmt.Errorf("bpf: deny list has %d IPv4 and %d IPv6 entries; at most %d each", len(e4), len(e6), denyMax)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := replace(f, f.objs.RtDeny4, &f.deny4, e4, func(a, b [8]byte) int { return bytes.Compare(a[:], b[:]) }); err != nil {
		return fmt.Errorf("bpf: IPv4 deny list: %w", err)
	}
	if err := replace(f, f.objs.RtDeny6, &f.deny6, e6, func(a, b [20]byte) int { return bytes.Compare(a[:], b[:]) }); err != nil {
		return fmt.Errorf("bpf: IPv6 deny list: %w", err)
	}
	ctl := f.ctl
	ctl.DenyGen++
	ctl.Deny4N, ctl.Deny6N = uint32(n4), uint32(n6)
	if err := f.objs.RtCtl.Update(uint32(0), &ctl, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: bump deny generation: %w", err)
	}
	f.ctl = ctl
	return nil
}

func key6(p netip.Prefix) [20]byte {
	var k [20]byte
	binary.NativeEndian.PutUint32(k[:], uint32(p.Bits()))
	a := p.Addr().As16()
	copy(k[4:], a[:])
	return k
}

// sortedUnique sorts by key; of equal keys, a deny wins over a SPLIT mark.
func sortedUnique[K any](es []ent[K], cmp func(a, b K) int) []ent[K] {
	slices.SortFunc(es, func(a, b ent[K]) int {
		if c := cmp(a.k, b.k); c != 0 {
			return c
		}
		return int(a.v) - int(b.v)
	})
	return slices.CompactFunc(es, func(a, b ent[K]) bool { return cmp(a.k, b.k) == 0 })
}

func replace[K any](f *Filter, outer *ebpf.Map, live **trie[K], es []ent[K], cmp func(a, b K) int) error {
	if t := *live; t != nil {
		put, del := diff(t.ents, es, cmp)
		if len(put)+len(del) <= len(es)/4+4096 {
			// Denies before SPLIT marks: a /64 turning from DENY to SPLIT
			// must find its longer prefixes already there.
			slices.SortStableFunc(put, func(a, b ent[K]) int { return int(a.v) - int(b.v) })
			err := fillTrie(t.m, put)
			if err == nil {
				err = deleteKeys(t.m, del)
			}
			if err != nil { // the live trie is old ∪ part of new: forget it
				t.m.Close()
				*live = nil
				return err
			}
			t.ents = es
			return nil
		}
	}
	inner, err := ebpf.NewMap(f.innerSpec(outer))
	if err != nil {
		return fmt.Errorf("create trie: %w", err)
	}
	if err := fillTrie(inner, es); err != nil {
		inner.Close()
		return err
	}
	if err := outer.Put(uint32(0), inner); err != nil {
		inner.Close()
		return fmt.Errorf("swap trie: %w", err)
	}
	if *live != nil {
		(*live).m.Close()
	}
	*live = &trie[K]{m: inner, ents: es}
	return nil
}

// diff returns the entries of b that are new or changed (put) and the keys
// only in a (del); both sorted by key.
func diff[K any](a, b []ent[K], cmp func(a, b K) int) (put []ent[K], del []K) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		c := 0
		switch {
		case j == len(b):
			c = -1
		case i == len(a):
			c = 1
		default:
			c = cmp(a[i].k, b[j].k)
		}
		switch {
		case c < 0:
			del = append(del, a[i].k)
			i++
		case c > 0:
			put = append(put, b[j])
			j++
		default:
			if a[i].v != b[j].v {
				put = append(put, b[j])
			}
			i, j = i+1, j+1
		}
	}
	return put, del
}

const batch = 1 << 16

func fillTrie[K any](m *ebpf.Map, es []ent[K]) error {
	keys, vals := make([]K, 0, min(len(es), batch)), make([]uint8, 0, min(len(es), batch))
	for len(es) > 0 {
		n := min(len(es), batch)
		keys, vals = keys[:0], vals[:0]
		for _, e := range es[:n] {
			keys, vals = append(keys, e.k), append(vals, e.v)
		}
		_, err := m.BatchUpdate(keys, vals, nil)
		if errors.Is(err, ebpf.ErrNotSupported) { // LPM batch ops: Linux 6.x
			for _, e := range es {
				if err := m.Put(e.k, e.v); err != nil {
					return fmt.Errorf("insert %v: %w", e.k, err)
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert prefixes: %w", err)
		}
		es = es[n:]
	}
	return nil
}

func deleteKeys[K any](m *ebpf.Map, keys []K) error {
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !isNotExist(err) {
			return fmt.Errorf("delete %v: %w", k, err)
		}
	}
	return nil
}
