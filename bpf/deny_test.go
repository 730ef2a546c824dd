package bpf

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// bigList is n prefixes (90 % IPv4 /16../32, 10 % IPv6 /32../128) that avoid
// 192.0.2.0/24, 198.18.0.0/15 and 2001:db8::/32, plus extra.
func bigList(seed uint64, n int, extra ...netip.Prefix) []netip.Prefix {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]netip.Prefix, 0, n+len(extra))
	for len(out) < n {
		if len(out)%10 == 9 {
			var a [16]byte
			a[0], a[1] = 0x24, byte(r.IntN(256))
			for i := 2; i < 16; i++ {
				a[i] = byte(r.Uint32())
			}
			out = append(out, netip.PrefixFrom(netip.AddrFrom16(a), 32+r.IntN(97)).Masked())
			continue
		}
		a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(180)), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
		out = append(out, netip.PrefixFrom(a, 16+r.IntN(17)).Masked())
	}
	return append(out, extra...)
}

func innerMemlock(t testing.TB, outer *ebpf.Map) uint64 {
	t.Helper()
	var id ebpf.MapID
	if err := outer.Lookup(uint32(0), &id); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMapFromID(id)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	ml, _ := info.Memlock()
	return ml
}

// TestDenyListSwap1M swaps between two lists of 1,000,000 prefixes while
// test runs hammer the program: a source on both lists is never passed, and
// a source on neither is never dropped.
func TestDenyListSwap1M(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	always := netip.MustParsePrefix("192.0.2.66/32")
	lists := [][]netip.Prefix{bigList(1, 1_000_000, always), bigList(2, 1_000_000, always)}
	denied, allowed := tcp4("192.0.2.66", 0).bytes(), tcp4("192.0.2.99", 0).bytes()
	if err := f.ReplaceDenyList(lists[0]); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var runs, bad atomic.Int64
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if ret, _, err := f.objs.RampartXdp.Test(denied); err != nil || ret != xdpDrop {
					bad.Add(1)
				}
				if ret, _, err := f.objs.RampartXdp.Test(allowed); err != nil || ret != xdpPass {
					bad.Add(1)
				}
				runs.Add(2)
			}
		}()
	}
	for i := range 4 {
		start := time.Now()
		if err := f.ReplaceDenyList(lists[(i+1)%2]); err != nil {
			t.Fatal(err)
		}
		t.Logf("swap %d: %d prefixes in %v; live IPv4 trie memlock %.1f MiB, IPv6 %.1f MiB",
			i, len(lists[0]), time.Since(start).Round(time.Millisecond),
			float64(innerMemlock(t, f.objs.RtDeny4))/(1<<20), float64(innerMemlock(t, f.objs.RtDeny6))/(1<<20))
	}
	// A small change against the list this process installed is applied in
	// place: milliseconds, even with a million prefixes loaded.
	newcomer := tcp4("192.0.2.130", 0).bytes()
	if ret, _, err := f.objs.RampartXdp.Test(newcomer); err != nil || ret != xdpPass {
		t.Fatalf("newcomer before: %d %v", ret, err)
	}
	grown := append(lists[0][:len(lists[0]):len(lists[0])], netip.MustParsePrefix("192.0.2.128/25"))
	start := time.Now()
	if err := f.ReplaceDenyList(grown); err != nil {
		t.Fatal(err)
	}
	t.Logf("in-place change of 1 prefix in a list of %d: %v", len(grown), time.Since(start))
	if ret, _, err := f.objs.RampartXdp.Test(newcomer); err != nil || ret != xdpDrop {
		t.Fatalf("newcomer after: %d %v", ret, err)
	}
	if err := f.ReplaceDenyList(lists[0]); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() != 0 || runs.Load() < 100 {
		t.Fatalf("%d wrong verdicts in %d runs during swaps", bad.Load(), runs.Load())
	}
	t.Logf("%d test runs during the swaps, all right", runs.Load())
	s, err := f.Stats()
	uniq := map[netip.Prefix]bool{}
	for _, p := range lists[0] {
		uniq[p] = true
	}
	if err != nil || s.Deny4+s.Deny6 != len(uniq) {
		t.Fatalf("Stats %+v %v", s, err)
	}
}

// TestDenyListAdoptEditSwap: an unchanged list writes nothing; a reopened
// filter (an agent restart) adopts the pinned tries when the list hashes the
// same, in any input order; a small change is an edit in place; a list that
// does not match, or a hash cleared by an interrupted change, means a swap.
func TestDenyListAdoptEditSwap(t *testing.T) {
	needRoot(t)
	root := netnstest.PinRoot(t)
	f, err := Open(root, &Options{MaxSources: 4096, testClock: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.SetVIPs(testVIPs); err != nil {
		t.Fatal(err)
	}
	f.setClock(t, 1e12)
	l1 := bigList(3, 20_000, netip.MustParsePrefix("192.0.2.66/32"), netip.MustParsePrefix("2001:db8:6:6::66/128"))
	shuffled := slices.Clone(l1)
	rand.New(rand.NewPCG(9, 9)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	l2 := append(slices.Clone(l1), netip.MustParsePrefix("192.0.2.128/25"), netip.MustParsePrefix("2001:db8:7::/48"))
	verdict := func(f *Filter, src string) uint32 {
		t.Helper()
		dst := "203.0.113.10"
		if strings.Contains(src, ":") {
			dst = "2001:db8::10"
		}
		ret, _, err := f.objs.RampartXdp.Test(pkt{src: src, dst: dst, proto: 6, sport: 40000, dport: 80}.bytes())
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
	step := func(f *Filter, l []netip.Prefix, op string) {
		t.Helper()
		gen := f.ctl.DenyGen
		st, err := f.ReplaceDenyListStats(l)
		if err != nil || st.Op != op {
			t.Fatalf("ReplaceDenyList: %+v %v; want op %s", st, err, op)
		}
		if bumped := f.ctl.DenyGen != gen; bumped != (op == "swap" || op == "edit") {
			t.Fatalf("op %s: deny generation %d -> %d", op, gen, f.ctl.DenyGen)
		}
		t.Logf("%s: %d put, %d deleted; prepare %v, maps %v", st.Op, st.Put, st.Delete, st.Prepare, st.Maps)
	}
	reopen := func(f *Filter) *Filter {
		t.Helper()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		g, err := Open(root, &Options{MaxSources: 4096, testClock: true})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	step(f, l1, "swap")
	step(f, shuffled, "unchanged")
	f = reopen(f)
	step(f, shuffled, "adopted")
	for src, want := range map[string]uint32{"192.0.2.66": xdpDrop, "2001:db8:6:6::66": xdpDrop, "192.0.2.130": xdpPass, "2001:db8:7::1": xdpPass} {
		if got := verdict(f, src); got != want {
			t.Errorf("after adoption, %s: verdict %d, want %d", src, got, want)
		}
	}
	step(f, l2, "edit")
	if verdict(f, "192.0.2.130") != xdpDrop || verdict(f, "2001:db8:7::1") != xdpDrop || verdict(f, "192.0.2.66") != xdpDrop {
		t.Error("the edit did not deny the new prefixes, or lost an old one")
	}
	f = reopen(f)
	step(f, l1, "swap") // the pins hold l2
	step(f, l2, "edit")
	if err := f.objs.RtDenyh.Update(uint32(0), &rampartDenyh{}, 0); err != nil { // as if a change was cut short
		t.Fatal(err)
	}
	f = reopen(f)
	step(f, l2, "swap")
	f = reopen(f)
	step(f, l2, "adopted")
	if err := f.Remove(); err != nil {
		t.Fatal(err)
	}
}

// TestDenySplitCache: in a SPLIT /64 the exact verdict of each address is
// cached per CPU with the deny generation; repeated packets keep their
// verdict, and a list change flips them at once (a denied address never
// gets per-source state, a passing one does).
func TestDenySplitCache(t *testing.T) {
	f := openVIPs(t, Options{MaxSources: 4096})
	f.SetLimits(Limits{PPS: 1e6, PPSBurst: 1e6})
	a, b := "2001:db8:5:5::a", "2001:db8:5:5::b"
	frame := func(src string) []byte {
		return pkt{src: src, dst: "2001:db8::10", proto: 6, sport: 40000, dport: 80}.bytes()
	}
	check := func(when string, want map[string]uint32) {
		t.Helper()
		for range 3 {
			for src, w := range want {
				if ret, _, err := f.objs.RampartXdp.Test(frame(src)); err != nil || ret != w {
					t.Fatalf("%s: %s verdict %d (%v), want %d", when, src, ret, err, w)
				}
			}
		}
	}
	lists := [][]netip.Prefix{
		{netip.MustParsePrefix(a + "/128"), netip.MustParsePrefix("2001:db8:5:5::c/127")},
		{netip.MustParsePrefix(b + "/128"), netip.MustParsePrefix("2001:db8:5:5::c/127")},
	}
	for i := range 4 {
		if err := f.ReplaceDenyList(lists[i%2]); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			check(fmt.Sprintf("list %d", i), map[string]uint32{a: xdpDrop, b: xdpPass, "2001:db8:5:5::d": xdpDrop, "2001:db8:5:5::e": xdpPass})
		} else {
			check(fmt.Sprintf("list %d", i), map[string]uint32{a: xdpPass, b: xdpDrop, "2001:db8:5:5::d": xdpDrop, "2001:db8:5:5::e": xdpPass})
		}
	}
	if err := f.ReplaceDenyList(nil); err != nil {
		t.Fatal(err)
	}
	check("empty list", map[string]uint32{a: xdpPass, b: xdpPass, "2001:db8:5:5::d": xdpPass})
}
