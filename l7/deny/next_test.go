package deny

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// diffLists says how a and b differ as indexes (reasons compared as text).
func diffLists(a, b *List) string {
	if a.counts != b.counts {
		return fmt.Sprintf("counts %v != %v", a.counts, b.counts)
	}
	for k := range a.ids {
		if len(a.ids[k]) != len(b.ids[k]) {
			return fmt.Sprintf("%s: %d != %d ids", kinds[k], len(a.ids[k]), len(b.ids[k]))
		}
		for v, ra := range a.ids[k] {
			rb, ok := b.ids[k][v]
			if !ok || ra.exp != rb.exp || a.reasons[ra.reason] != b.reasons[rb.reason] {
				return fmt.Sprintf("%s %q: %+v vs %+v (%v)", kinds[k], v, ra, rb, ok)
			}
		}
	}
	for f, s := range [2][2]*prefixSet{{&a.v4, &b.v4}, {&a.v6, &b.v6}} {
		x, y := s[0], s[1]
		if !slices.Equal(x.keys, y.keys) || !slices.Equal(x.first, y.first) || len(x.meta) != len(y.meta) {
			return fmt.Sprintf("family %d: keys or table differ (%d vs %d)", f, len(x.keys), len(y.keys))
		}
		for i := range x.meta {
			m, n := x.meta[i], y.meta[i]
			if m.exp != n.exp || m.parent != n.parent || m.bits != n.bits || a.reasons[m.reason] != b.reasons[n.reason] {
				return fmt.Sprintf("family %d prefix %d: %+v vs %+v", f, i, m, n)
			}
		}
	}
	return ""
}

func mixedEntries(rng *rand.Rand, n int) []Entry {
	es := randomCIDRs(rng, n*6/10, false)
	es = append(es, randomCIDRs(rng, n*2/10, true)...)
	for i := range n / 5 {
		es = append(es, Entry{Kind: kinds[i%4], Value: fmt.Sprintf("id-%d-%x", i, rng.Uint32()), ExpiresAt: t0.Add(time.Hour)})
	}
	for i := range es {
		if rng.IntN(7) == 0 {
			es[i].Reason = fmt.Sprintf("r%d", rng.IntN(5))
		}
	}
	return es
}

// TestParseNext edits a list in several places at once (adds, deletes,
// expiry and reason changes, first and last entries, every kind) and checks
// that ParseNext takes the incremental path and builds the index Parse
// builds; and that edits breaking the rules are refused with Parse's error.
func TestParseNext(t *testing.T) {
	priv, pub := testKey(1)
	rng := rand.New(rand.NewPCG(11, 12))
	base := mixedEntries(rng, 5000)
	prev, err := Parse(mustBuild(t, base, 1, priv), pub)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 40 {
		es := slices.Clone(base)
		switch round {
		case 0: // nothing changed
		case 1: // everything removed
			es = nil
		default:
			for range 1 + rng.IntN(20) {
				switch i := rng.IntN(len(es)); rng.IntN(4) {
				case 0:
					es = slices.Delete(es, i, i+1)
				case 1:
					es[i].ExpiresAt = es[i].ExpiresAt.Add(time.Minute)
				case 2:
					es[i].Reason = "changed"
				case 3:
					es = append(es, mixedEntries(rng, 5)...)
				}
			}
		}
		data := mustBuild(t, es, uint64(2+round), priv)
		want, err := Parse(data, pub)
		if err != nil {
			t.Fatal(err)
		}
		if l := decodeNext(prev, want.raw, want.opened.Blocks()); len(es) > 0 && l == nil {
			t.Fatalf("round %d: the incremental path gave up", round)
		}
		got, err := ParseNext(prev, data, pub)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffLists(want, got); d != "" {
			t.Fatalf("round %d: ParseNext differs from Parse: %s", round, d)
		}
		if got.Sequence() != want.Sequence() || got.DigestHex() != want.DigestHex() {
			t.Fatalf("round %d: envelope differs", round)
		}
		// CIDRChanges is the difference of CIDRs, at a time some entries
		// have expired too.
		for _, now := range []time.Time{t0, t0.Add(time.Hour + 30*time.Second)} {
			add, del, ok := got.CIDRChanges(prev, now)
			if !ok && len(es) > 0 {
				t.Fatalf("round %d: no CIDR changes from the incremental path", round)
			}
			if !ok {
				continue
			}
			before, after := prev.CIDRs(now), want.CIDRs(now)
			wantAdd, wantDel := minus(after, before), minus(before, after)
			if !slices.Equal(add, wantAdd) || !slices.Equal(del, wantDel) {
				t.Fatalf("round %d: CIDRChanges = +%v -%v, want +%v -%v", round, add, del, wantAdd, wantDel)
			}
		}
	}
	// Bad edits of prev's bytes, signed: the same error as Parse.
	raw := string(prev.raw)
	rec := func(i int) (int, int) { // byte range of the i-th record
		s := 0
		for range i + 1 {
			s = s + 1 + indexFrom(raw, s+1, recStart)
		}
		return s, s + indexFrom(raw, s, "}") + 1
	}
	s3, e3 := rec(3)
	s9, e9 := rec(9)
	for name, list := range map[string]string{
		"swapped":   raw[:s3] + raw[s9:e9] + raw[e3:s9] + raw[s3:e3] + raw[e9:],
		"duplicate": raw[:e3] + "," + raw[s3:e3] + raw[e3:],
		"bad-cidr":  raw[:s3] + `{"kind":"cidr","value":"1.2.3.4/8","expires_at":"2030-01-02T04:04:05Z"},` + raw[s3:],
		"trailing":  raw[:len(raw)-2] + ",]}",
		"garbage":   raw[:e9] + "x" + raw[e9:],
	} {
		data := resignCut(list, ruleCuts(list), envelope.Version{Sequence: 99})
		_, werr := Parse(data, pub)
		_, gerr := ParseNext(prev, data, pub)
		if werr == nil || gerr == nil || werr.Error() != gerr.Error() {
			t.Errorf("%s: Parse says %v, ParseNext says %v", name, werr, gerr)
		}
	}
}

// TestParseNextStream: a whole new list streams exactly its CIDRs (IPv4
// then IPv6, in order, with their expiries) and gives the list Parse
// gives; a few changes take the incremental path and stream nothing; a
// bad file fails as Parse does, whatever was streamed.
func TestParseNextStream(t *testing.T) {
	priv, pub := testKey(1)
	rng := rand.New(rand.NewPCG(21, 22))
	base := mixedEntries(rng, 20_000)
	prev, err := Parse(mustBuild(t, base, 1, priv), pub)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		p   netip.Prefix
		exp int64
	}
	var streamed []got
	fn := func(p netip.Prefix, exp int64) { streamed = append(streamed, got{p, exp}) }
	other := mixedEntries(rng, 20_000)
	other[3].ExpiresAt = t0.Add(time.Minute) // expired at tc: streamed too
	tc := t0.Add(2 * time.Minute)
	data := mustBuild(t, other, 2, priv)
	want, err := Parse(data, pub)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseNextStream(prev, data, pub, fn)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLists(want, l); d != "" {
		t.Fatalf("ParseNextStream differs from Parse: %s", d)
	}
	var live []netip.Prefix
	for _, g := range streamed {
		if tc.Unix() < g.exp {
			live = append(live, g.p)
		}
	}
	if len(streamed) != want.Count(KindCIDR) || !slices.Equal(live, want.CIDRs(tc)) || len(live) == len(streamed) {
		t.Fatalf("streamed %d CIDRs (%d live), the list has %d (%d live)", len(streamed), len(live), want.Count(KindCIDR), len(want.CIDRs(tc)))
	}
	// Two entries added: incremental, nothing streamed.
	streamed = nil
	next := mustBuild(t, append(slices.Clone(other), mixedEntries(rng, 2)...), 3, priv)
	l2, err := ParseNextStream(l, next, pub, fn)
	if err != nil || len(streamed) != 0 || l2.base == nil {
		t.Fatalf("a 2-entry change: %v, %d streamed, incremental %v", err, len(streamed), l2 != nil && l2.base != nil)
	}
	// Only the blocks the two entries fell in were hashed.
	if st, n := l2.opened.Stat, len(l2.opened.Blocks()); n < 10 || st.Hashed > 2 || st.Reused != n-st.Hashed {
		t.Fatalf("a 2-entry change of %d blocks: %+v", n, st)
	}
	// A bad record late in the list: refused like Parse, after streaming.
	streamed = nil
	raw := string(want.raw)
	i := strings.LastIndex(raw, `{"kind":"cidr"`)
	badRaw := raw[:i] + `{"kind":"cidr","value":"1.2.3.4/8","expires_at":"2030-01-02T04:04:05Z"},` + raw[i:]
	bad := resignCut(badRaw, ruleCuts(badRaw), envelope.Version{Sequence: 4})
	_, perr := Parse(bad, pub)
	if _, err := ParseNextStream(prev, bad, pub, fn); err == nil || perr == nil || err.Error() != perr.Error() || len(streamed) == 0 {
		t.Fatalf("bad file: ParseNextStream %v (%d streamed), Parse %v", err, len(streamed), perr)
	}
}

// ruleCuts cuts list bytes by the rule, finding records by their starts
// (test lists have no `,{"kind":"` inside values).
func ruleCuts(list string) []int {
	var c cutter
	var cuts []int
	rec := len(head)
	for {
		j := strings.Index(list[rec:], `,{"kind":"`)
		if j < 0 {
			return cuts
		}
		end := rec + j + 1
		if c.after([]byte(list[rec:end-1]), end) {
			cuts = append(cuts, end)
		}
		rec = end
	}
}

func minus(a, b []netip.Prefix) []netip.Prefix {
	in := map[netip.Prefix]bool{}
	for _, p := range b {
		in[p] = true
	}
	var out []netip.Prefix
	for _, p := range a {
		if !in[p] {
			out = append(out, p)
		}
	}
	return out
}

func indexFrom(s string, from int, sub string) int {
	for i := from; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i - from
		}
	}
	return -1
}

// FuzzParseNext: the incremental decoder accepts exactly what decodeList
// accepts, and builds the same index.
func FuzzParseNext(f *testing.F) {
	priv, pub := testKey(1)
	prevs := []*List{}
	for _, es := range [][]Entry{sample(), nil, mixedEntries(rand.New(rand.NewPCG(1, 2)), 60), mixedEntries(rand.New(rand.NewPCG(3, 4)), 2000)} {
		l, err := Parse(mustBuild(f, es, 1, priv), pub)
		if err != nil {
			f.Fatal(err)
		}
		prevs = append(prevs, l)
	}
	for i, p := range prevs {
		f.Add(uint8(i), p.raw)
		other := mustBuild(f, append(sample()[1:], Entry{Kind: KindCIDR, Value: "10.9.0.0/16", ExpiresAt: t0.Add(time.Hour)}), 2, priv)
		l, _ := Parse(other, pub)
		f.Add(uint8(i), l.raw)
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		prev := prevs[int(which)%len(prevs)]
		want, err := decodeList(b, nil, nil)
		got := decodeNext(prev, b, nil)
		if err != nil {
			if got != nil {
				t.Fatalf("decodeList refuses (%v), decodeNext accepts: %s", err, b)
			}
			return
		}
		if got != nil {
			if d := diffLists(want, got); d != "" {
				t.Fatalf("differs from decodeList: %s\n%s", d, b)
			}
		}
		// With block tables (b cut by the rule as far as a plain search
		// finds records): blocks shared with prev are skipped unread.
		cuts := ruleCuts(string(b))
		want, err = decodeList(b, &cutCheck{cuts: cuts}, nil)
		got = decodeNext(prev, b, blocksOf(b, cuts))
		if err != nil {
			if got != nil {
				t.Fatalf("decodeList refuses (%v), decodeNext with blocks accepts: %s", err, b)
			}
			return
		}
		if got != nil {
			if d := diffLists(want, got); d != "" {
				t.Fatalf("with blocks, differs from decodeList: %s\n%s", d, b)
			}
		}
	})
}

func blocksOf(b []byte, cuts []int) []envelope.Block {
	bounds := append(append([]int{0}, cuts...), len(b))
	out := make([]envelope.Block, 0, len(bounds)-1)
	for i := 1; i < len(bounds); i++ {
		out = append(out, envelope.Block{Offset: bounds[i-1], Len: bounds[i] - bounds[i-1], Hash: sha256.Sum256(b[bounds[i-1]:bounds[i]])})
	}
	return out
}

// BenchmarkParseNext1M: a 1,000,000-CIDR file with 2 entries added (IPv4
// and IPv6, far apart), against the list before; Parse of the same file
// and the digest alone for scale.
func BenchmarkParseNext1M(b *testing.B) {
	priv, pub := testKey(1)
	es := randomCIDRs(rand.New(rand.NewPCG(5, 6)), 900_000, false)
	es = append(es, randomCIDRs(rand.New(rand.NewPCG(7, 8)), 100_000, true)...)
	prev, err := Parse(mustBuild(b, es, 1, priv), pub)
	if err != nil {
		b.Fatal(err)
	}
	es = append(es, Entry{Kind: KindCIDR, Value: "192.0.2.0/24", ExpiresAt: t0.Add(time.Hour)},
		Entry{Kind: KindCIDR, Value: "2001:db8::/48", ExpiresAt: t0.Add(time.Hour)})
	data := mustBuild(b, es, 2, priv)
	b.Run("ParseNext", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if l, err := ParseNext(prev, data, pub); err != nil || l.base == nil {
				b.Fatal("not incremental", err)
			}
		}
	})
	b.Run("Parse", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := Parse(data, pub); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			sha256.Sum256(data)
		}
	})
}

// TestParseNextNested: edits of densely nested prefixes (adds and removals
// that become or stop being the parent of many others, in both families,
// across the top-bits table's slots) give exactly the index a full parse
// builds: parent links, table and all.
func TestParseNextNested(t *testing.T) {
	priv, pub := testKey(1)
	rng := rand.New(rand.NewPCG(11, 12))
	pick := func() string {
		if rng.IntN(3) == 0 {
			a := [16]byte{0x20, 0x01, 0x0d, byte(0xb8 + rng.IntN(2)), byte(rng.IntN(2)), byte(rng.IntN(4))}
			return netip.PrefixFrom(netip.AddrFrom16(a), 16+rng.IntN(33)).Masked().String()
		}
		a := [4]byte{byte(10 + rng.IntN(2)), byte(rng.IntN(2)), byte(rng.IntN(4)), byte(rng.IntN(8))}
		return netip.PrefixFrom(netip.AddrFrom4(a), 7+rng.IntN(26)).Masked().String()
	}
	for round := range 300 {
		have := map[string]bool{}
		var es []Entry
		for range 20 + rng.IntN(200) {
			if v := pick(); !have[v] {
				have[v] = true
				es = append(es, Entry{Kind: KindCIDR, Value: v, ExpiresAt: t0.Add(time.Hour)})
			}
		}
		prev, err := Parse(mustBuild(t, es, 1, priv), pub)
		if err != nil {
			t.Fatal(err)
		}
		next := slices.DeleteFunc(slices.Clone(es), func(Entry) bool { return rng.IntN(8) == 0 })
		for range rng.IntN(6) {
			if v := pick(); !have[v] {
				have[v] = true
				next = append(next, Entry{Kind: KindCIDR, Value: v, ExpiresAt: t0.Add(2 * time.Hour)})
			}
		}
		data := mustBuild(t, next, 2, priv)
		want, err := Parse(data, pub)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseNext(prev, data, pub)
		if err != nil {
			t.Fatal(err)
		}
		if got.base == nil && len(next) > 0 {
			t.Fatalf("round %d: not incremental", round)
		}
		if d := diffLists(want, got); d != "" {
			t.Fatalf("round %d: %s", round, d)
		}
	}
}
