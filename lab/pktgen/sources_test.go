package pktgen

import (
	"net/netip"
	"testing"
)

func TestSourcesStayInPrefix(t *testing.T) {
	for _, p := range []string{"198.51.100.7/32", "198.51.100.0/24", "198.51.100.128/25", "0.0.0.0/0", "203.0.113.0/31",
		"fd00::/64", "fd00:1:2:3:4::/80", "2001:db8::/32", "2001:db8::/48", "fd00::1/128", "::/0", "fd00::/63", "fd00::/65"} {
		pre := netip.MustParsePrefix(p)
		for _, seq := range []bool{false, true} {
			s, err := NewSources(pre, seq, 0, 1, 7)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[netip.Addr]bool{}
			for range 4096 {
				a := s.Next()
				if !pre.Contains(a) {
					t.Fatalf("%s (sequential %v): %v outside", p, seq, a)
				}
				seen[a] = true
			}
			hosts := pre.Addr().BitLen() - pre.Bits()
			want := 4096
			if hosts < 12 {
				want = 1 << hosts
			}
			// Sequential sources cover every address once per round; random
			// ones (4096 draws) at least half the space or 3000 distinct.
			if seq && len(seen) != want {
				t.Errorf("%s sequential: %d distinct, want %d", p, len(seen), want)
			}
			if !seq && len(seen) < min(want/2, 3000) {
				t.Errorf("%s random: %d distinct of %d possible", p, len(seen), want)
			}
		}
	}
}

func TestSourcesSequentialOrder(t *testing.T) {
	pre := netip.MustParsePrefix("192.0.2.4/30")
	// Two workers sharing the prefix: one takes the even, one the odd.
	a, _ := NewSources(pre, true, 0, 2, 0)
	b, _ := NewSources(pre, true, 1, 2, 0)
	var got []string
	for range 3 {
		got = append(got, a.Next().String(), b.Next().String())
	}
	want := []string{"192.0.2.4", "192.0.2.5", "192.0.2.6", "192.0.2.7", "192.0.2.4", "192.0.2.5"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sequence %v, want %v", got, want)
		}
	}
	c, _ := NewSources(netip.MustParsePrefix("fd00::/32"), true, 0, 1, 0)
	c.Next()
	if a := c.Next(); a != netip.MustParseAddr("fd00::1") {
		t.Fatalf("second IPv6 sequential source %v", a)
	}
}

func TestSourcesBadPrefix(t *testing.T) {
	for _, p := range []netip.Prefix{{}, netip.MustParsePrefix("::ffff:192.0.2.0/120")} {
		if _, err := NewSources(p, false, 0, 1, 0); err == nil {
			t.Errorf("%v: no error", p)
		}
	}
}
