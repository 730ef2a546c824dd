package bpf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/cilium/ebpf"
)

const (
	denyMax   = 4 << 20 // DENY_MAX in rampart.c: trie entries per family
	denyValue = 1       // DENY
	splitMark = 2       // SPLIT
)

// e4 is an IPv4 deny entry: address << 8 | prefix length, so entries sort
// by address, then length (the order the agent's lists already have).
type e4 = uint64

// e6 is an IPv6 trie entry: address halves, prefix length, value.
type e6 struct {
	hi, lo uint64
	bits   uint8
	v      uint8 // denyValue or splitMark
}

func cmp6(a, b e6) int {
	return cmp.Or(cmp.Compare(a.hi, b.hi), cmp.Compare(a.lo, b.lo), cmp.Compare(a.bits, b.bits))
}

// trie is the live LPM trie of one family as this process last wrote (or
// adopted) it, with its entries sorted.
type trie[E any] struct {
	m    *ebpf.Map
	ents []E
	ver  uint64 // trieVersion at the last change
}

// DenyStats says what the last ReplaceDenyList did.
type DenyStats struct {
	Op          string        // "unchanged", "adopted" (restart, pinned tries hash the same), "edit" (in place), "swap"
	Put, Delete int           // entries written and deleted (edit, swap)
	Prepare     time.Duration // Go: normalise, sort, split marks, hash, diff
	Maps        time.Duration // kernel map updates
	Fill        time.Duration // DenyLoad: kernel fill while the producer ran (not in Maps)
}

// ReplaceDenyList makes prefixes the deny list. Any order is accepted;
// sorted by address then length (netip.Addr.Compare, then Bits) is fastest.
//
//   - Unchanged from what this process installed: nothing is written.
//   - First call after Open, when the pinned tries hold exactly this list
//     (a SHA-256 of the entries is pinned with the tries' ids): they are
//     adopted as they are, nothing is written (an agent restart).
//   - A small change (at most a quarter of the list plus 4096 entries) is
//     applied in place: new and changed entries first, removals last. A
//     prefix in both lists stays in the trie throughout; one only in the new
//     list may be missing, one only in the old list may still deny, until
//     the edit reaches it. Each entry changes atomically, not the list.
//   - Otherwise each family's entries go into a fresh LPM trie, which replaces
//     the live one in one update of the outer map-in-map slot: a packet sees
//     the whole old or the whole new list of its family (IPv4 is swapped
//     before IPv6). The kernel waits for running programs before that update
//     returns; memory is doubled only during the swap. The two families are
//     filled at the same time.
//
// Then the deny generation is bumped, invalidating verdicts cached per source.
// IPv6 prefixes longer than /64 also put a SPLIT mark on their /64 (unless a
// prefix of /64 or shorter covers it), so per-/64 caching stays exact.
func (f *Filter) ReplaceDenyList(prefixes []netip.Prefix) error {
	_, err := f.ReplaceDenyListStats(prefixes)
	return err
}

// ReplaceDenyListStats is ReplaceDenyList, also saying what it did.
func (f *Filter) ReplaceDenyListStats(prefixes []netip.Prefix) (DenyStats, error) {
	start := time.Now()
	d, err := denyEntries(prefixes)
	if err != nil {
		return DenyStats{}, err
	}
	// f.dmu, not f.mu: a swap takes seconds, and the other methods (counters,
	// stats for /metrics) must not wait for it.
	f.dmu.Lock()
	defer f.dmu.Unlock()
	st := DenyStats{Op: "swap"}
	if f.deny4 != nil && f.deny6 != nil && slices.Equal(f.deny4.ents, d.v4) && slices.Equal(f.deny6.ents, d.v6) {
		st.Op, st.Prepare = "unchanged", time.Since(start)
		return st, nil
	}
	if f.deny4 == nil && f.deny6 == nil && f.adopt(d) {
		st.Op, st.Prepare = "adopted", time.Since(start)
		return st, nil
	}
	plan4 := plan(f.deny4, d.v4, cmp.Compare[uint64])
	plan6 := plan(f.deny6, d.v6, cmp6)
	st.Prepare = time.Since(start)
	mapsAt := time.Now()
	// Dirty while the tries change: a crash midway leaves no hash to adopt.
	if err := f.objs.RtDenyh.Update(uint32(0), &rampartDenyh{}, ebpf.UpdateAny); err != nil {
		return st, fmt.Errorf("bpf: clear deny hash: %w", err)
	}
	// The families' tries are independent (each has its own lock in the
	// kernel): fill them on two CPUs.
	var n6 applied
	var err6 error
	done6 := make(chan struct{})
	go func() {
		defer close(done6)
		n6, err6 = apply(f, f.objs.RtDeny6, &f.deny6, plan6, d.v6, key6)
	}()
	n4, err4 := apply(f, f.objs.RtDeny4, &f.deny4, plan4, d.v4, key4)
	<-done6
	if err4 != nil || err6 != nil {
		var errs []error
		if err4 != nil {
			errs = append(errs, fmt.Errorf("bpf: IPv4 deny list: %w", err4))
		}
		if err6 != nil {
			errs = append(errs, fmt.Errorf("bpf: IPv6 deny list: %w", err6))
		}
		return st, errors.Join(errs...)
	}
	st.Put, st.Delete = n4.put+n6.put, n4.del+n6.del
	if n4.swap || n6.swap {
		st.Op = "swap"
	} else {
		st.Op = "edit"
	}
	if err := f.bumpDenyGen(len(d.v4), d.n6); err != nil {
		return st, err
	}
	if err := f.writeDenyHash(d.sum); err != nil {
		return st, err
	}
	st.Maps = time.Since(mapsAt)
	return st, nil
}

// bumpDenyGen bumps the deny generation (invalidating verdicts cached per
// source) and records the tries' sizes. Call with f.dmu held.
func (f *Filter) bumpDenyGen(n4, n6 int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctl := f.ctl
	ctl.DenyGen++
	ctl.Deny4N, ctl.Deny6N = uint32(n4), uint32(n6)
	if err := f.objs.RtCtl.Update(uint32(0), &ctl, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: bump deny generation: %w", err)
	}
	f.ctl = ctl
	return nil
}

// denySet is a deny list as trie entries, sorted, with its hash.
type denySet struct {
	v4  []e4
	v6  []e6 // denies and SPLIT marks
	n6  int  // IPv6 denies
	sum [32]byte
}

func denyEntries(prefixes []netip.Prefix) (*denySet, error) {
	d := &denySet{}
	var v6 []e6
	for _, p := range prefixes {
		if !p.IsValid() {
			return nil, fmt.Errorf("bpf: invalid deny prefix %v", p)
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if a := p.Addr(); a.Is4() {
			b := a.As4()
			d.v4 = append(d.v4, uint64(binary.BigEndian.Uint32(b[:]))<<8|uint64(p.Bits()))
			continue
		}
		b := p.Addr().As16()
		v6 = append(v6, e6{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint8(p.Bits()), denyValue})
	}
	if !slices.IsSorted(d.v4) {
		slices.Sort(d.v4)
	}
	d.v4 = slices.Compact(d.v4)
	if !slices.IsSortedFunc(v6, cmp6) {
		slices.SortFunc(v6, cmp6)
	}
	v6 = slices.CompactFunc(v6, func(a, b e6) bool { return cmp6(a, b) == 0 })
	d.n6 = len(v6)
	d.v6 = withSplitMarks(v6)
	if len(d.v4) > denyMax || len(d.v6) > denyMax {
		return nil, fmt.Errorf("bpf: deny list has %d IPv4 and %d IPv6 entries; at most %d each", len(d.v4), len(d.v6), denyMax)
	}
	d.sum = hashDeny(d.v4, d.v6)
	return d, nil
}

// withSplitMarks adds a SPLIT mark at the /64 of each prefix longer than /64
// that no prefix of /64 or shorter covers (v6 sorted; see splitMarker).
func withSplitMarks(v6 []e6) []e6 {
	var s splitMarker
	out := make([]e6, 0, len(v6)+len(v6)/8)
	for _, e := range v6 {
		out = s.add(out, e)
	}
	return out
}

// splitMarker adds SPLIT marks to IPv6 entries given one by one in sorted
// order (address, length): the prefixes containing an entry are a stack of
// the entries before it. A mark, when one is due, is appended right before
// its entry, which keeps the output sorted: anything between the /64's
// start and the entry is either in the same /64 and longer (and had the
// same mark due, already appended) or a /64-or-shorter prefix covering it
// (then no mark is due).
type splitMarker struct {
	stack []e6
	last  e6 // the last mark appended (bits 64 when there is one)
}

func (s *splitMarker) add(out []e6, e e6) []e6 {
	for len(s.stack) > 0 && !contains6(s.stack[len(s.stack)-1], e) {
		s.stack = s.stack[:len(s.stack)-1]
	}
	s.stack = append(s.stack, e)
	// stack[0] is the shortest prefix containing e
	if e.bits > 64 && (s.stack[0].bits > 64 || len(s.stack) == 1) {
		if m := (e6{hi: e.hi, bits: 64, v: splitMark}); s.last != m {
			out, s.last = append(out, m), m
		}
	}
	return append(out, e)
}

// contains6 reports whether prefix p contains prefix e (p.bits <= e.bits).
func contains6(p, e e6) bool {
	if p.bits > e.bits {
		return false
	}
	if p.bits <= 64 {
		return p.bits == 0 || (p.hi^e.hi)>>(64-p.bits) == 0
	}
	return p.hi == e.hi && (p.lo^e.lo)>>(128-p.bits) == 0
}

func key4(x e4) ([8]byte, uint8) {
	var k [8]byte
	binary.NativeEndian.PutUint32(k[:], uint32(x&0xff))
	binary.BigEndian.PutUint32(k[4:], uint32(x>>8))
	return k, denyValue
}

func key6(x e6) ([20]byte, uint8) {
	var k [20]byte
	binary.NativeEndian.PutUint32(k[:], uint32(x.bits))
	binary.BigEndian.PutUint64(k[4:], x.hi)
	binary.BigEndian.PutUint64(k[12:], x.lo)
	return k, x.v
}
