package bpf

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// trieKeys reads a live trie's entries (kernel key bytes → value).
func trieKeys[K comparable](t *testing.T, m *ebpf.Map) map[K]uint8 {
	t.Helper()
	out := map[K]uint8{}
	var k K
	var v uint8
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDenyListEditDelta: EditDenyList with a few puts and deletes (IPv4,
// IPv6 with SPLIT marks appearing and going) leaves exactly the tries a
// full load of the new list has, bumps the generation, falls back to a
// full load when the delta does not fit, and writes the pinned hash in the
// background so a restart adopts the edited tries.
func TestDenyListEditDelta(t *testing.T) {
	needRoot(t)
	root := netnstest.PinRoot(t)
	f, err := Open(root, &Options{MaxSources: 4096, testClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Remove() }()
	l1 := bigList(5, 20_000)
	if _, err := f.ReplaceDenyListStats(l1); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	cur := slices.Clone(l1)
	for round := range 4 {
		var put, del []netip.Prefix
		for range 5 {
			i := rng.IntN(len(cur))
			del = append(del, cur[i])
			cur = slices.Delete(cur, i, i+1)
		}
		put = append(put, netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:1:2::5/128"))
		put[0] = netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(round)}), 32)
		put[1] = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 1, 2, 15: byte(round)}), 128)
		cur = append(cur, put...)
		gen := f.ctl.DenyGen
		st, err := f.EditDenyList(cur, put, del)
		if err != nil || st.Op != "edit" || st.Put < len(put) || st.Delete < len(del) {
			t.Fatalf("round %d: EditDenyList = %+v, %v", round, st, err)
		}
		if f.ctl.DenyGen == gen {
			t.Fatalf("round %d: deny generation not bumped", round)
		}
		want, err := denyEntries(cur)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.deny4.ents, want.v4) || !slices.Equal(f.deny6.ents, want.v6) {
			t.Fatalf("round %d: entries differ from a full computation", round)
		}
		got4, got6 := trieKeys[[8]byte](t, f.deny4.m), trieKeys[[20]byte](t, f.deny6.m)
		if len(got4) != len(want.v4) || len(got6) != len(want.v6) {
			t.Fatalf("round %d: tries hold %d+%d entries, want %d+%d", round, len(got4), len(got6), len(want.v4), len(want.v6))
		}
		for _, e := range want.v4 {
			if k, v := key4(e); got4[k] != v {
				t.Fatalf("round %d: IPv4 entry %x: %d, want %d", round, e, got4[k], v)
			}
		}
		for _, e := range want.v6 {
			if k, v := key6(e); got6[k] != v {
				t.Fatalf("round %d: IPv6 entry %+v: %d, want %d", round, e, got6[k], v)
			}
		}
		if st, err := f.ReplaceDenyListStats(cur); err != nil || st.Op != "unchanged" {
			t.Fatalf("round %d: the full path sees %+v, %v", round, st, err)
		}
	}
	// A delete of something not there: a full load instead.
	if st, err := f.EditDenyList(cur, nil, []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}); err != nil || st.Op != "unchanged" {
		t.Fatalf("mismatched delta: %+v, %v; want the full path (unchanged)", st, err)
	}
	// The background hash lands; a restart adopts.
	cur = append(cur, netip.MustParsePrefix("198.18.0.0/15"))
	if st, err := f.EditDenyList(cur, []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}, nil); err != nil || st.Op != "edit" {
		t.Fatalf("%+v, %v", st, err)
	}
	want, _ := denyEntries(cur)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) { // liveness bound
		var h rampartDenyh
		if err := f.objs.RtDenyh.Lookup(uint32(0), &h); err == nil && h.Sum == want.sum {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deny hash was not written")
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f, err = Open(root, &Options{MaxSources: 4096, testClock: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := f.ReplaceDenyListStats(cur); err != nil || st.Op != "adopted" {
		t.Fatalf("after restart: %+v, %v; want adopted", st, err)
	}
}
