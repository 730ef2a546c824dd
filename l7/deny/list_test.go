package deny

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func mustList(t testing.TB, entries []Entry) *List {
	t.Helper()
	priv, pub := testKey(1)
	l, err := Parse(mustBuild(t, entries, 1, priv), pub)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCheckKinds(t *testing.T) {
	h := t0.Add(time.Hour)
	l := mustList(t, []Entry{
		{Kind: KindAPIKeyID, Value: "k1", ExpiresAt: h, Reason: "leaked key"},
		{Kind: KindJTI, Value: "j1", ExpiresAt: h},
		{Kind: KindSubject, Value: "s1", ExpiresAt: h, Reason: "bad user"},
		{Kind: KindTenant, Value: "t1", ExpiresAt: t0.Add(time.Minute), Reason: "tenant"},
		{Kind: KindCIDR, Value: "203.0.113.9", ExpiresAt: h, Reason: "ip"},
	})
	ip := netip.MustParseAddr("203.0.113.9")
	cases := []struct {
		q      Query
		at     time.Time
		reason string
	}{
		{Query{KeyID: "k1"}, t0, "leaked key"},
		{Query{JTI: "j1"}, t0, "jti"}, // no reason: the kind
		{Query{Subject: "s1"}, t0, "bad user"},
		{Query{Tenant: "t1"}, t0, "tenant"},
		{Query{IP: ip}, t0, "ip"},
		{Query{KeyID: "k2", JTI: "j2", Subject: "s2", Tenant: "t2", IP: ip.Next()}, t0, ""},
		{Query{KeyID: "j1", JTI: "k1", Subject: "t1", Tenant: "s1"}, t0, ""}, // values count only for their kind
		{Query{KeyID: "x", Tenant: "t1"}, t0, "tenant"},
		{Query{KeyID: "k1", IP: ip}, t0, "ip"}, // the IP is checked first
		{Query{Tenant: "t1"}, t0.Add(time.Minute - time.Nanosecond), "tenant"},
		{Query{Tenant: "t1"}, t0.Add(time.Minute), ""}, // expired at expires_at
		{Query{KeyID: "k1", JTI: "j1", Subject: "s1", IP: ip}, h.Add(time.Second), ""},
		{Query{}, t0, ""},
	}
	for i, c := range cases {
		reason, denied := l.Check(c.q, c.at)
		if reason != c.reason || denied != (c.reason != "") {
			t.Errorf("case %d: Check(%+v) = %q, %v; want %q", i, c.q, reason, denied, c.reason)
		}
	}
	var nilList *List
	if _, denied := nilList.Check(Query{KeyID: "k1"}, t0); denied || nilList.Len() != 0 || nilList.Sequence() != 0 {
		t.Error("a nil list denies or counts")
	}
}

func TestCheckIP(t *testing.T) {
	h, d := t0.Add(time.Hour), t0.Add(24*time.Hour)
	var entries []Entry
	for _, e := range []struct {
		v   string
		exp time.Time
	}{
		{"10.0.0.0/8", d}, {"10.1.0.0/16", d}, {"10.1.2.0/24", h}, {"10.1.2.3", d}, {"10.1.2.128/25", d},
		{"::ffff:192.0.2.0/120", d}, {"2001:db8::/32", d}, {"2001:db8:1::/48", d}, {"2001:db8:1:2::/64", d},
		{"2001:db8:1:2::5", d}, {"2001:db8:ffff::/48", h}, {"2001:db8:ffff:1::/64", h},
	} {
		entries = append(entries, Entry{Kind: KindCIDR, Value: e.v, ExpiresAt: e.exp, Reason: e.v})
	}
	l := mustList(t, entries)
	later := t0.Add(2 * time.Hour)
	cases := []struct {
		ip     string
		at     time.Time
		reason string
	}{
		{"10.1.2.3", t0, "10.1.2.3"},
		{"::ffff:10.1.2.3", t0, "10.1.2.3"},
		{"10.1.2.4", t0, "10.1.2.0/24"},
		{"10.1.2.200", t0, "10.1.2.128/25"},
		{"10.1.3.1", t0, "10.1.0.0/16"},
		{"10.255.255.255", t0, "10.0.0.0/8"},
		{"10.0.0.0", t0, "10.0.0.0/8"},
		{"11.0.0.0", t0, ""},
		{"9.255.255.255", t0, ""},
		{"192.0.2.77", t0, "::ffff:192.0.2.0/120"},
		{"::ffff:192.0.2.77", t0, "::ffff:192.0.2.0/120"},
		{"192.0.3.0", t0, ""},
		{"2001:db8:1:2::5", t0, "2001:db8:1:2::5"},
		{"2001:db8:1:2::6", t0, "2001:db8:1:2::/64"},
		{"2001:db8:1:3::", t0, "2001:db8:1::/48"},
		{"2001:db8:2::", t0, "2001:db8::/32"},
		{"2001:db8:ffff:1::1", t0, "2001:db8:ffff:1::/64"},
		{"2001:db9::", t0, ""},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", t0, ""},
		{"fe80::1%eth0", t0, ""},
		{"2001:db8:1:2::5%eth0", t0, "2001:db8:1:2::5"}, // zones are ignored
		{"::a01:203", t0, ""},                           // IPv4-compatible is not IPv4-mapped
		// Later the /24 and the two ffff prefixes have expired: the next
		// shorter live prefix answers.
		{"10.1.2.4", later, "10.1.0.0/16"},
		{"10.1.2.3", later, "10.1.2.3"},
		{"2001:db8:ffff:1::1", later, "2001:db8::/32"},
		{"10.1.2.3", d.Add(-time.Nanosecond), "10.1.2.3"},
		{"10.1.2.3", d, ""},
	}
	for _, c := range cases {
		ip := netip.MustParseAddr(c.ip)
		reason, denied := l.CheckIP(ip, c.at)
		if reason != c.reason || denied != (c.reason != "") {
			t.Errorf("CheckIP(%s) at %s = %q, %v; want %q", c.ip, c.at.Format(time.TimeOnly), reason, denied, c.reason)
		}
		if r2, d2 := l.Check(Query{IP: ip}, c.at); r2 != reason || d2 != denied {
			t.Errorf("Check(IP %s) = %q, %v; CheckIP said %q, %v", c.ip, r2, d2, reason, denied)
		}
	}
	if _, denied := l.CheckIP(netip.Addr{}, t0); denied {
		t.Error("the zero Addr is denied")
	}

	got := l.CIDRs(later)
	want := []netip.Prefix{}
	for _, s := range []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3/32", "10.1.2.128/25", "192.0.2.0/24",
		"2001:db8::/32", "2001:db8:1::/48", "2001:db8:1:2::/64", "2001:db8:1:2::5/128"} {
		want = append(want, netip.MustParsePrefix(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("CIDRs = %v\nwant %v", got, want)
	}
	if n := len(l.CIDRs(t0)); n != 12 {
		t.Errorf("CIDRs(t0) has %d prefixes, want 12", n)
	}
	// NextCIDRExpiry: when CIDRs changes next (h, then d, then never).
	for _, c := range []struct {
		at   time.Time
		want time.Time
	}{{t0, h}, {h.Add(-time.Nanosecond), h}, {h, d}, {later, d}, {d, time.Time{}}} {
		got, ok := l.NextCIDRExpiry(c.at)
		if !got.Equal(c.want) || ok != !c.want.IsZero() {
			t.Errorf("NextCIDRExpiry(%s) = %s, %v; want %s", c.at.Format(time.TimeOnly), got, ok, c.want)
		}
		if !ok {
			continue
		}
		if before, at := l.CIDRs(got.Add(-time.Nanosecond)), l.CIDRs(got); slices.Equal(before, at) {
			t.Errorf("CIDRs do not change at NextCIDRExpiry(%s) = %s", c.at.Format(time.TimeOnly), got)
		}
	}
	if _, ok := (*List)(nil).NextCIDRExpiry(t0); ok {
		t.Error("a nil list has an expiry")
	}
}

func TestCheckIPZeroLength(t *testing.T) {
	d := t0.Add(time.Hour)
	v6all := mustList(t, []Entry{{Kind: KindCIDR, Value: "::/0", ExpiresAt: d}})
	v4all := mustList(t, []Entry{{Kind: KindCIDR, Value: "0.0.0.0/0", ExpiresAt: d}})
	for _, c := range []struct {
		l      *List
		ip     string
		denied bool
	}{
		{v6all, "::1", true}, {v6all, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true},
		{v6all, "1.2.3.4", false}, {v6all, "::ffff:1.2.3.4", false},
		{v4all, "1.2.3.4", true}, {v4all, "::ffff:255.255.255.255", true}, {v4all, "::1", false},
	} {
		if _, denied := c.l.CheckIP(netip.MustParseAddr(c.ip), t0); denied != c.denied {
			t.Errorf("%v: CheckIP(%s) = %v", c.l.CIDRs(t0), c.ip, denied)
		}
	}
}

// TestCheckIPAgainstLinearScan compares lookups with a scan of every entry,
// on crowded, nested prefixes with mixed expiries.
func TestCheckIPAgainstLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randAddr := func(v6 bool) netip.Addr {
		if v6 { // crowd into 2001:db8::/29 so prefixes nest
			var b [16]byte
			b[0], b[1], b[2], b[3] = 0x20, 0x01, 0x0d, 0xb8|byte(rng.IntN(8))
			for i := 4; i < 16; i++ {
				b[i] = byte(rng.IntN(3)) // few distinct bytes: many shared prefixes
			}
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(64)), byte(rng.IntN(256))})
	}
	seen := map[netip.Prefix]bool{}
	var entries []Entry
	var prefixes []netip.Prefix
	var exps []time.Time
	for len(entries) < 3000 {
		v6 := rng.IntN(2) == 0
		a := randAddr(v6)
		bits := 18 + rng.IntN(15)
		if v6 {
			bits = 48 + rng.IntN(81)
		}
		p := netip.PrefixFrom(a, bits).Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		exp := t0.Add(time.Duration(1+rng.IntN(120)) * time.Minute)
		entries = append(entries, Entry{Kind: KindCIDR, Value: p.String(), ExpiresAt: exp, Reason: p.String()})
		prefixes, exps = append(prefixes, p), append(exps, exp)
	}
	l := mustList(t, entries)
	hits, shadowed := 0, 0 // shadowed: a longer containing prefix had expired
	for i := range 50000 {
		ip := randAddr(i%2 == 0)
		now := t0.Add(time.Duration(rng.IntN(130)) * time.Minute)
		want, best, longest := "", -1, -1
		for j, p := range prefixes {
			if p.Contains(ip) {
				longest = max(longest, p.Bits())
				if now.Before(exps[j]) && p.Bits() > best {
					want, best = p.String(), p.Bits()
				}
			}
		}
		if want != "" {
			hits++
			if longest > best {
				shadowed++
			}
		}
		if got, denied := l.CheckIP(ip, now); got != want || denied != (want != "") {
			t.Fatalf("CheckIP(%s) at +%s = %q, %v; linear scan says %q", ip, now.Sub(t0), got, denied, want)
		}
	}
	t.Logf("%d of 50000 lookups denied, %d of them by a shorter prefix than an expired one", hits, shadowed)
	if hits < 5000 || hits > 45000 || shadowed < 1000 {
		t.Errorf("the random test is lopsided: %d hits, %d shadowed", hits, shadowed)
	}
}

func TestCheckAllocs(t *testing.T) {
	d := t0.Add(time.Hour)
	l := mustList(t, []Entry{
		{Kind: KindCIDR, Value: "10.0.0.0/8", ExpiresAt: d}, {Kind: KindCIDR, Value: "2001:db8::/32", ExpiresAt: d},
		{Kind: KindTenant, Value: "t1", ExpiresAt: d}, {Kind: KindSubject, Value: "s1", ExpiresAt: d, Reason: "r"},
	})
	key := []byte("tenant-x") // built at run time, as a request's values are
	queries := []Query{
		{IP: netip.MustParseAddr("10.1.2.3")}, {IP: netip.MustParseAddr("::ffff:11.1.2.3")},
		{IP: netip.MustParseAddr("2001:db8::1")}, {KeyID: "a", JTI: "b", Subject: "c", Tenant: string(key)},
		{Subject: "s1"}, {Tenant: "t1", IP: netip.MustParseAddr("192.0.2.1")},
	}
	for _, q := range queries {
		if n := testing.AllocsPerRun(1000, func() { l.Check(q, t0) }); n != 0 {
			t.Errorf("Check(%+v) allocates %.1f times", q, n)
		}
		if n := testing.AllocsPerRun(1000, func() { l.CheckIP(q.IP, t0) }); n != 0 {
			t.Errorf("CheckIP(%s) allocates %.1f times", q.IP, n)
		}
	}
}
