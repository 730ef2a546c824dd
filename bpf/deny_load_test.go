package bpf

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// canonical sorts and dedups a list the way a deny.List gives its CIDRs.
func canonical(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if a.Addr().Is4() != b.Addr().Is4() {
			if a.Addr().Is4() {
				return -1
			}
			return 1
		}
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out)
}

// checkTries asserts that f's tries (entries and kernel contents) are
// exactly what a full load of list gives.
func checkTries(t *testing.T, f *Filter, list []netip.Prefix) {
	t.Helper()
	want, err := denyEntries(list)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.deny4.ents, want.v4) || !slices.Equal(f.deny6.ents, want.v6) {
		t.Fatalf("entries differ from a full computation (%d+%d, want %d+%d)", len(f.deny4.ents), len(f.deny6.ents), len(want.v4), len(want.v6))
	}
	got4, got6 := trieKeys[[8]byte](t, f.deny4.m), trieKeys[[20]byte](t, f.deny6.m)
	if len(got4) != len(want.v4) || len(got6) != len(want.v6) {
		t.Fatalf("tries hold %d+%d entries, want %d+%d", len(got4), len(got6), len(want.v4), len(want.v6))
	}
	for _, e := range want.v4 {
		if k, v := key4(e); got4[k] != v {
			t.Fatalf("IPv4 entry %x: %d, want %d", e, got4[k], v)
		}
	}
	for _, e := range want.v6 {
		if k, v := key6(e); got6[k] != v {
			t.Fatalf("IPv6 entry %+v: %d, want %d", e, got6[k], v)
		}
	}
	var h rampartDenyh
	if err := f.objs.RtDenyh.Lookup(uint32(0), &h); err != nil || h.Sum != want.sum {
		t.Fatalf("pinned deny hash %x (%v), want %x", h.Sum[:8], err, want.sum[:8])
	}
}

// load streams list into a DenyLoad in uneven chunks and commits it.
func load(t *testing.T, f *Filter, list, extra []netip.Prefix) (DenyStats, error) {
	t.Helper()
	l, err := f.StartDenyLoad()
	if err != nil {
		t.Fatal(err)
	}
	for i, n := 0, 1; i < len(list); i, n = i+n, n*3%10007+1 {
		l.Add(slices.Clone(list[i:min(i+n, len(list))]))
	}
	return l.Commit(extra)
}

// TestDenyLoad: a list streamed into a DenyLoad, plus extra prefixes, is
// swapped in as exactly what ReplaceDenyList writes for the union (SPLIT
// marks, hash, generation); the same list again is "unchanged"; an
// out-of-order stream and an aborted load leave the live tries as they were
// and free the fresh ones; a restart adopts what a load installed.
func TestDenyLoad(t *testing.T) {
	needRoot(t)
	root := netnstest.PinRoot(t)
	f, err := Open(root, &Options{MaxSources: 4096, testClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Remove() }()
	pp := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	if f.DenyInstalled() {
		t.Fatal("a new filter says it has deny tries installed")
	}
	if err := f.ReplaceDenyList(bigList(7, 5_000)); err != nil {
		t.Fatal(err)
	}
	if !f.DenyInstalled() {
		t.Fatal("no deny tries installed after ReplaceDenyList")
	}
	// SPLIT marks: /128s in a /64 nothing covers, in one a /48 covers, and
	// one made redundant by an extra /64.
	list := canonical(append(bigList(8, 30_000), pp("2001:db8:1:2::5/128", "2001:db8:1:2::7/128",
		"2001:db8:9::/48", "2001:db8:9:0:1::/80", "2001:db8:5:5::1/128", "192.0.2.0/24", "192.0.2.128/25")...))
	extra := pp("198.51.100.7/32", "192.0.2.0/24", "2001:db8:5:5::/64", "2001:db8:7:7::9/128")
	gen := f.ctl.DenyGen
	st, err := load(t, f, list, extra)
	if err != nil || st.Op != "swap" {
		t.Fatalf("Commit = %+v, %v; want a swap", st, err)
	}
	if f.ctl.DenyGen == gen {
		t.Fatal("deny generation not bumped")
	}
	union := append(slices.Clone(list), extra...)
	checkTries(t, f, union)
	if st, err := f.ReplaceDenyListStats(union); err != nil || st.Op != "unchanged" {
		t.Fatalf("the full path after a load sees %+v, %v; want unchanged", st, err)
	}
	if st, err := load(t, f, list, extra); err != nil || st.Op != "unchanged" {
		t.Fatalf("the same list loaded again: %+v, %v; want unchanged", st, err)
	}

	// Out of order: refused, nothing swapped.
	bad := slices.Clone(list)
	bad[100], bad[101] = bad[101], bad[100]
	live4, live6 := f.deny4.m, f.deny6.m
	if _, err := load(t, f, bad, nil); !errors.Is(err, errOrder) {
		t.Fatalf("out-of-order load: %v, want errOrder", err)
	}
	if f.deny4.m != live4 || f.deny6.m != live6 {
		t.Fatal("a failed load replaced the live tries")
	}
	checkTries(t, f, union)

	// Aborted: the fresh tries are freed, the live ones stay.
	l, err := f.StartDenyLoad()
	if err != nil {
		t.Fatal(err)
	}
	l.Add(slices.Clone(bigList(9, 1000)))
	l.Abort()
	if _, err := l.v4.m.Info(); err == nil {
		t.Fatal("an aborted load's IPv4 trie is still open")
	}
	if _, err := l.Commit(nil); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
	checkTries(t, f, union)

	// A second list, IPv4 only, then a restart adopts it.
	list2 := canonical(bigList(10, 20_000))
	list2 = slices.DeleteFunc(list2, func(p netip.Prefix) bool { return !p.Addr().Is4() })
	if st, err := load(t, f, list2, nil); err != nil || st.Op != "swap" {
		t.Fatalf("second load: %+v, %v", st, err)
	}
	checkTries(t, f, list2)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(root, &Options{MaxSources: 4096, testClock: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := f.ReplaceDenyListStats(list2); err != nil || st.Op != "adopted" {
		t.Fatalf("after restart: %+v, %v; want adopted", st, err)
	}
}

// TestSplitMarks: the marks splitMarker adds entry by entry are those of
// the rule computed naively (a mark at the /64 of every prefix longer than
// /64 that no prefix of /64 or shorter contains), in sorted order.
func TestSplitMarks(t *testing.T) {
	list := canonical(append(bigList(11, 50_000), netip.MustParsePrefix("2001:db8::/64"),
		netip.MustParsePrefix("2001:db8::1/128"), netip.MustParsePrefix("2001:db8:0:1::1/128"),
		netip.MustParsePrefix("2001:db8:0:1:8000::/65"), netip.MustParsePrefix("2001:db8:8000::/33"),
		netip.MustParsePrefix("2001:db8:8000::/72"), netip.MustParsePrefix("2001:db8:4000::/72")))
	var denies []e6
	short := map[netip.Prefix]bool{}
	for _, p := range list {
		if p.Addr().Is4() {
			continue
		}
		b := p.Addr().As16()
		denies = append(denies, e6{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint8(p.Bits()), denyValue})
		if p.Bits() <= 64 {
			short[p] = true
		}
	}
	want := slices.Clone(denies)
	marked := map[uint64]bool{}
	for _, e := range denies {
		if e.bits <= 64 || marked[e.hi] {
			continue
		}
		var a [16]byte
		binary.BigEndian.PutUint64(a[:8], e.hi)
		covered := false
		for bits := 0; bits <= 64 && !covered; bits++ {
			covered = short[netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()]
		}
		if !covered {
			marked[e.hi] = true
			want = append(want, e6{hi: e.hi, bits: 64, v: splitMark})
		}
	}
	slices.SortFunc(want, cmp6)
	var s splitMarker
	var got []e6
	for _, e := range denies {
		got = s.add(got, e)
	}
	if len(marked) < 100 || !slices.Equal(got, want) {
		t.Fatalf("streamed: %d entries, want %d (%d marks)", len(got), len(want), len(marked))
	}
}
