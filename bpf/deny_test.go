package bpf

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
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
