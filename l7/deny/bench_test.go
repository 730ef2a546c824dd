package deny

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// randomCIDRs returns n distinct random prefixes of one family with a mix
// of lengths like real deny lists: IPv4 70% /32, 25% /24, 5% /16–/23;
// IPv6 (in 2000::/3) 40% /128, 30% /64, 20% /48, 10% /32–/47. Nested
// prefixes occur wherever chance puts them.
func randomCIDRs(rng *rand.Rand, n int, v6 bool) []Entry {
	exp := t0.Add(time.Hour)
	seen := make(map[netip.Prefix]bool, n)
	out := make([]Entry, 0, n)
	for len(out) < n {
		var a netip.Addr
		var bits int
		r := rng.IntN(100)
		if v6 {
			var b [16]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			b[0] = 0x20 | b[0]&0x1f // 2000::/3
			a = netip.AddrFrom16(b)
			bits = [...]int{128, 64, 48, 32 + rng.IntN(16)}[bucket(r, 40, 70, 90)]
		} else {
			a = netip.AddrFrom4([4]byte{byte(1 + rng.IntN(223)), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())})
			bits = [...]int{32, 24, 16 + rng.IntN(8)}[bucket(r, 70, 95)]
		}
		p := netip.PrefixFrom(a, bits).Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, Entry{Kind: KindCIDR, Value: p.String(), ExpiresAt: exp})
	}
	return out
}

func bucket(r int, edges ...int) int {
	for i, e := range edges {
		if r < e {
			return i
		}
	}
	return len(edges)
}

// queries returns addresses: half inside a random entry, half anywhere.
func queries(rng *rand.Rand, entries []Entry, v6 bool) []netip.Addr {
	qs := make([]netip.Addr, 4096)
	for i := range qs {
		var b [16]byte
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		a := netip.AddrFrom16(b)
		if !v6 {
			a = netip.AddrFrom4([4]byte(b[:4]))
		}
		if i%2 == 0 { // keep the host bits, take the network bits of an entry
			p := netip.MustParsePrefix(entries[rng.IntN(len(entries))].Value)
			pb, ab := p.Addr().AsSlice(), a.AsSlice()
			for j := range pb {
				keep := min(max(p.Bits()-8*j, 0), 8)
				mask := byte(uint16(0xff00) >> keep)
				ab[j] = pb[j]&mask | ab[j]&^mask
			}
			a, _ = netip.AddrFromSlice(ab)
		}
		qs[i] = a
	}
	return qs
}

type benchData struct {
	l       *List
	entries []Entry
}

var benchLists = map[string]benchData{}

// benchList builds and parses a list once per name.
func benchList(b *testing.B, name string, entries func() []Entry) benchData {
	if d, ok := benchLists[name]; ok {
		return d
	}
	priv, pub := testKey(1)
	es := entries()
	l, err := Parse(mustBuild(b, es, 1, priv), pub)
	if err != nil {
		b.Fatal(err)
	}
	benchLists[name] = benchData{l, es}
	return benchLists[name]
}

func BenchmarkCheckIP(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		for _, v6 := range []bool{false, true} {
			name := fmt.Sprintf("v4/%dk", n/1000)
			if v6 {
				name = fmt.Sprintf("v6/%dk", n/1000)
			}
			b.Run(name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				d := benchList(b, name, func() []Entry { return randomCIDRs(rng, n, v6) })
				l, qs := d.l, queries(rng, d.entries, v6)
				hits := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if _, denied := l.CheckIP(qs[i&4095], t0); denied {
						hits++
					}
				}
				b.ReportMetric(float64(hits)/float64(b.N), "hit-ratio")
			})
		}
	}
}

func identityEntries(n int) []Entry {
	exp := t0.Add(time.Hour)
	out := make([]Entry, 0, n)
	for i := range n {
		k := kinds[i%4]
		out = append(out, Entry{Kind: k, Value: fmt.Sprintf("%s-%08x", k, i*2654435761%(1<<32)), ExpiresAt: exp, Reason: "revoked"})
	}
	return out
}

func BenchmarkCheck(b *testing.B) {
	l := benchList(b, "identities", func() []Entry { return identityEntries(100_000) }).l
	for _, hit := range []bool{false, true} {
		b.Run(map[bool]string{false: "miss-4-fields", true: "hit-tenant"}[hit], func(b *testing.B) {
			qs := make([]Query, 1024)
			for i := range qs {
				j := i * 97 % 25_000 * 4
				qs[i] = Query{KeyID: fmt.Sprintf("api_key_id-%08x", (j+1)*2654435761%(1<<32)),
					JTI: "jti-unknown", Subject: "subject-unknown", Tenant: fmt.Sprintf("tenant-x%d", i)}
				if hit {
					qs[i].Tenant = fmt.Sprintf("tenant-%08x", (j+3)*2654435761%(1<<32))
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, denied := l.Check(qs[i&1023], t0); denied != hit {
					b.Fatalf("Check(%+v) = %v", qs[i&1023], denied)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	entries := append(identityEntries(50_000), randomCIDRs(rng, 40_000, false)...)
	entries = append(entries, randomCIDRs(rng, 10_000, true)...)
	priv, pub := testKey(1)
	data := mustBuild(b, entries, 1, priv)
	b.Run("100k", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(data, pub); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkListMemory reports the heap a parsed list holds.
func BenchmarkListMemory(b *testing.B) {
	for _, c := range []struct {
		name    string
		entries func() []Entry
	}{
		{"v4/1M-prefixes", func() []Entry { return randomCIDRs(rand.New(rand.NewPCG(5, 6)), 1_000_000, false) }},
		{"v6/1M-prefixes", func() []Entry { return randomCIDRs(rand.New(rand.NewPCG(5, 6)), 1_000_000, true) }},
		{"1M-identities", func() []Entry { return identityEntries(1_000_000) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			priv, pub := testKey(1)
			data := mustBuild(b, c.entries(), 1, priv)
			b.SetBytes(int64(len(data)))
			var heap uint64
			var n int
			for b.Loop() {
				var m0, m1 runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m0)
				l, err := Parse(data, pub)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&m1)
				heap, n = m1.HeapAlloc-m0.HeapAlloc, l.Len()
				runtime.KeepAlive(l)
			}
			b.ReportMetric(float64(heap), "heap-bytes")
			b.ReportMetric(float64(heap)/float64(n), "heap-bytes/entry")
		})
	}
}
