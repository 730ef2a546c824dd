package bpf

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
)

// trieVersion numbers every change to a live trie, so a deny hash computed
// in the background is written only if the tries are still what it hashed.
var trieVersion atomic.Uint64

// EditDenyList changes the deny list by a few prefixes: put are added, del
// removed (relative to the list this process installed); all is the whole
// new list, used only when the change cannot be made as an edit (nothing
// installed yet, or put and del do not fit what is installed), in which
// case this is ReplaceDenyListStats(all).
//
// It costs O(changes) kernel updates plus memmove-speed work on the sorted
// entries: no conversion, sort or hash of the whole list on the caller's
// path. The edit is applied in place like ReplaceDenyList's small-diff case
// (adds first, then deletes; each entry atomic, not the list). The pinned
// SHA-256 that lets a restart adopt the tries is computed in the
// background and written when done (the tries are marked dirty first, so a
// crash before it only costs the next start a full load).
func (f *Filter) EditDenyList(all, put, del []netip.Prefix) (DenyStats, error) {
	start := time.Now()
	p4, p6, err := denyEntriesSorted(put)
	if err != nil {
		return DenyStats{}, err
	}
	d4, d6, err := denyEntriesSorted(del)
	if err != nil {
		return DenyStats{}, err
	}
	f.dmu.Lock()
	if f.deny4 == nil || f.deny6 == nil {
		f.dmu.Unlock()
		return f.ReplaceDenyListStats(all)
	}
	v4, ok4 := editSorted(f.deny4.ents, p4, d4, cmp.Compare[uint64])
	var v6 []e6
	ok6 := true
	n6 := 0
	if len(p6) > 0 || len(d6) > 0 {
		denies := make([]e6, 0, len(f.deny6.ents))
		for _, e := range f.deny6.ents {
			if e.v == denyValue {
				denies = append(denies, e)
			}
		}
		denies, ok6 = editSorted(denies, p6, d6, cmp6)
		n6 = len(denies)
		v6 = withSplitMarks(denies)
	} else {
		v6 = f.deny6.ents
		for _, e := range v6 {
			if e.v == denyValue {
				n6++
			}
		}
	}
	var plan6 *editPlan[e6]
	if ok4 && ok6 {
		plan6 = plan(f.deny6, v6, cmp6)
	}
	if plan6 == nil || len(v4) > denyMax || len(v6) > denyMax {
		f.dmu.Unlock()
		return f.ReplaceDenyListStats(all)
	}
	defer f.dmu.Unlock()
	st := DenyStats{Op: "edit"}
	plan4 := &editPlan[e4]{put: p4, del: d4}
	st.Prepare = time.Since(start)
	mapsAt := time.Now()
	if err := f.objs.RtDenyh.Update(uint32(0), &rampartDenyh{}, ebpf.UpdateAny); err != nil {
		return st, fmt.Errorf("bpf: clear deny hash: %w", err)
	}
	n4, err := apply(f, f.objs.RtDeny4, &f.deny4, plan4, v4, key4)
	if err != nil {
		return st, fmt.Errorf("bpf: IPv4 deny list: %w", err)
	}
	n6a, err := apply(f, f.objs.RtDeny6, &f.deny6, plan6, v6, key6)
	if err != nil {
		return st, fmt.Errorf("bpf: IPv6 deny list: %w", err)
	}
	st.Put, st.Delete = n4.put+n6a.put, n4.del+n6a.del
	if err := f.bumpDenyGen(len(v4), n6); err != nil {
		return st, err
	}
	st.Maps = time.Since(mapsAt)
	t4, t6 := f.deny4, f.deny6
	ver4, ver6 := t4.ver, t6.ver
	go func() {
		sum := hashDeny(v4, v6)
		f.dmu.Lock()
		defer f.dmu.Unlock()
		if f.deny4 == t4 && f.deny6 == t6 && t4.ver == ver4 && t6.ver == ver6 {
			_ = f.writeDenyHash(sum) // on failure the tries stay dirty: a restart loads in full
		}
	}()
	return st, nil
}

// denyEntriesSorted converts a few prefixes to trie entries, sorted.
func denyEntriesSorted(ps []netip.Prefix) ([]e4, []e6, error) {
	var v4 []e4
	var v6 []e6
	for _, p := range ps {
		if !p.IsValid() {
			return nil, nil, fmt.Errorf("bpf: invalid deny prefix %v", p)
		}
		p = p.Masked()
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		if a := p.Addr(); a.Is4() {
			b := a.As4()
			v4 = append(v4, uint64(binary.BigEndian.Uint32(b[:]))<<8|uint64(p.Bits()))
			continue
		}
		b := p.Addr().As16()
		v6 = append(v6, e6{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint8(p.Bits()), denyValue})
	}
	slices.Sort(v4)
	slices.SortFunc(v6, cmp6)
	return slices.Compact(v4), slices.CompactFunc(v6, func(a, b e6) bool { return cmp6(a, b) == 0 }), nil
}

// editSorted returns es (sorted) with put inserted and del removed, by
// binary search and block copies; ok is false when a put is already there
// or a del is not (the edit does not fit es).
func editSorted[E comparable](es, put, del []E, cmpf func(a, b E) int) ([]E, bool) {
	out := make([]E, 0, len(es)+len(put)-len(del))
	i, a, d := 0, 0, 0
	for a < len(put) || d < len(del) {
		var x E
		isPut := d == len(del) || a < len(put) && cmpf(put[a], del[d]) < 0
		if isPut {
			x = put[a]
		} else {
			x = del[d]
		}
		j, found := slices.BinarySearchFunc(es[i:], x, cmpf)
		out, i = append(out, es[i:i+j]...), i+j
		if isPut {
			if found {
				return nil, false
			}
			out = append(out, x)
			a++
		} else {
			if !found {
				return nil, false
			}
			i++
			d++
		}
	}
	return append(out, es[i:]...), true
}

// hashDeny is the SHA-256 of trie entries that denyEntries computes.
func hashDeny(v4 []e4, v6 []e6) [32]byte {
	h := sha256.New()
	buf := make([]byte, 0, 64<<10)
	for _, x := range v4 {
		if buf = binary.LittleEndian.AppendUint64(buf, x); len(buf) >= 64<<10-24 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	buf = append(buf, 0xff) // family separator
	for _, x := range v6 {
		buf = binary.LittleEndian.AppendUint64(buf, x.hi)
		buf = binary.LittleEndian.AppendUint64(buf, x.lo)
		if buf = append(buf, x.bits, x.v); len(buf) >= 64<<10-24 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
