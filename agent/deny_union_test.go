package agent

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestEditUnionInPlace: random edits of a union (IPv4 and IPv6, with and
// without spare capacity) give what a fresh merge gives, keep it sorted,
// report exactly the prefixes that entered and left it, and write in place
// when there is room.
func TestEditUnionInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	pick := func() netip.Prefix {
		if r.IntN(4) == 0 {
			a := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(r.IntN(4)), byte(r.IntN(256))}
			return netip.PrefixFrom(netip.AddrFrom16(a), 48).Masked()
		}
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(r.IntN(8)), byte(r.IntN(256))}), 24+r.IntN(9)).Masked()
	}
	set := func(n int) []netip.Prefix {
		out := make([]netip.Prefix, 0, n)
		for range n {
			out = append(out, pick())
		}
		slices.SortFunc(out, comparePrefix)
		return slices.Compact(out)
	}
	for round := range 500 {
		snap := set(r.IntN(4))
		ch := set(r.IntN(200))
		union := mergeDeny(snap, ch)
		if round%2 == 0 { // room to grow in place
			union = append(make([]netip.Prefix, 0, unionCap(len(union))), union...)
		} else {
			union = slices.Clip(union)
		}
		var add, del []netip.Prefix
		for _, p := range set(r.IntN(6)) {
			if !slices.Contains(ch, p) {
				add = append(add, p)
			}
		}
		for _, p := range ch {
			if r.IntN(20) == 0 {
				del = append(del, p)
			}
		}
		next := slices.DeleteFunc(slices.Clone(ch), func(p netip.Prefix) bool { return slices.Contains(del, p) })
		next = mergeDeny(next, add)
		want := mergeDeny(snap, next)
		hadRoom := cap(union) >= len(want)
		base := union[:cap(union)]
		before := slices.Clone(union)
		got, put, drop := editUnion(union, snap, add, del)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: union %v, want %v (snap %v, channel %v, add %v, del %v)", round, got, want, snap, ch, add, del)
		}
		if !slices.IsSortedFunc(got, comparePrefix) {
			t.Fatalf("round %d: union not sorted: %v", round, got)
		}
		for _, p := range put {
			if slices.Contains(before, p) || !slices.Contains(want, p) {
				t.Fatalf("round %d: put %v was there before or is not there after", round, p)
			}
		}
		for _, p := range drop {
			if !slices.Contains(before, p) || slices.Contains(want, p) {
				t.Fatalf("round %d: drop %v was not there before or is there after", round, p)
			}
		}
		if len(before)+len(put)-len(drop) != len(want) {
			t.Fatalf("round %d: %d + %d put - %d dropped != %d", round, len(before), len(put), len(drop), len(want))
		}
		if hadRoom && len(got) > 0 && &got[0] != &base[0] {
			t.Fatalf("round %d: a union with room (cap %d for %d) was copied", round, cap(base), len(want))
		}
		if n := countV4(got); n != len(slices.DeleteFunc(slices.Clone(got), func(p netip.Prefix) bool { return !p.Addr().Is4() })) {
			t.Fatalf("round %d: countV4 %d", round, n)
		}
	}
}
