package agent

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestTranslate(t *testing.T) {
	listeners := []snapshot.Listener{
		{Name: "web", Protocols: []string{"http1"}},
		{Name: "tls", Protocols: []string{"h2", "http1", "h3"}},
		{Name: "quic", Protocols: []string{"h3"}},
	}
	a4, a6 := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8::10")
	p := func(a netip.Addr, pt uint16, proto bpf.Proto, l, n string) port {
		return port{a, pt, proto, sockKey{l, n}}
	}
	for _, c := range []struct {
		name    string
		l4      snapshot.L4
		extra   bpf.Limits
		maxVIPs int
		want    l4
		err     string
	}{
		{name: "empty", want: l4{}},
		{
			name: "http1 is TCP only, h3 adds UDP, h3 alone is UDP only",
			l4: snapshot.L4{VIPs: []snapshot.VIP{
				{Address: "2001:db8::10", Ports: []snapshot.VIPPort{{Port: 443, Listener: "tls"}}},
				{Address: "203.0.113.10", Ports: []snapshot.VIPPort{{Port: 80, Listener: "web"}, {Port: 443, Listener: "tls"}, {Port: 8443, Listener: "quic"}}},
			}},
			want: l4{
				Addrs: []netip.Addr{a4, a6},
				Ports: []port{
					p(a4, 80, bpf.TCP, "web", "tcp"), p(a4, 443, bpf.TCP, "tls", "tcp"), p(a4, 443, bpf.UDP, "tls", "udp"),
					p(a4, 8443, bpf.UDP, "quic", "udp"),
					p(a6, 443, bpf.TCP, "tls", "tcp"), p(a6, 443, bpf.UDP, "tls", "udp"),
				},
			},
		},
		{
			name: "IPv4-mapped VIP is IPv4",
			l4:   snapshot.L4{VIPs: []snapshot.VIP{{Address: "::ffff:203.0.113.10", Ports: []snapshot.VIPPort{{Port: 80, Listener: "web"}}}}},
			want: l4{Addrs: []netip.Addr{a4}, Ports: []port{p(a4, 80, bpf.TCP, "web", "tcp")}},
		},
		{
			name:  "limits, malformed pass, new sources from the agent",
			l4:    snapshot.L4{Malformed: "pass", Limits: snapshot.L4Limits{PacketsPerSecond: 100, SYNPerSecond: 5, SYNBurst: 20, MaxConnectionsPerSource: 50}},
			extra: bpf.Limits{NewSources: 1000},
			want: l4{Limits: bpf.Limits{PPS: 100, PPSBurst: 100, SYNRate: 5, SYNBurst: 20, MaxConns: 50,
				NewSources: 1000, NewSourceBurst: 1000, MalformedVIPPass: true}},
		},
		{
			name: "a burst without a rate is dropped (bpf reads it back as 0)",
			l4:   snapshot.L4{Malformed: "drop", Limits: snapshot.L4Limits{PacketBurst: 10}},
			want: l4{},
		},
		{
			name: "deny CIDRs masked, bare addresses are host prefixes",
			l4:   snapshot.L4{DenyCIDRs: []string{"198.51.100.77/24", "192.0.2.9", "2001:db8:5::1/48", "2001:db8::1"}},
			want: l4{Deny: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("192.0.2.9/32"),
				netip.MustParsePrefix("2001:db8:5::/48"), netip.MustParsePrefix("2001:db8::1/128")}},
		},
		{
			name: "unknown listener",
			l4:   snapshot.L4{VIPs: []snapshot.VIP{{Address: "203.0.113.10", Ports: []snapshot.VIPPort{{Port: 80, Listener: "nope"}}}}},
			err:  `unknown listener "nope"`,
		},
		{
			name:    "more entries than the map holds",
			l4:      snapshot.L4{VIPs: []snapshot.VIP{{Address: "203.0.113.10", Ports: []snapshot.VIPPort{{Port: 80, Listener: "web"}, {Port: 443, Listener: "tls"}}}}},
			maxVIPs: 3, // 1 + 2 + the address marker = 4
			err:     "exceed the map size 3",
		},
		{
			name: "bad deny CIDR",
			l4:   snapshot.L4{DenyCIDRs: []string{"10.0.0.0/33"}},
			err:  "not a prefix or address",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := translate(&snapshot.Config{Listeners: listeners, L4: c.l4}, c.extra, c.maxVIPs)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestBPFVIPsPointAtRegisteredSockets(t *testing.T) {
	a := netip.MustParseAddr("203.0.113.10")
	ports := []port{{a, 80, bpf.TCP, sockKey{"web", "tcp"}}, {a, 443, bpf.TCP, sockKey{"tls", "tcp"}}, {a, 443, bpf.UDP, sockKey{"tls", "udp"}}}
	reg := map[sockKey]uint32{{"web", "tcp"}: 0, {"tls", "udp"}: 5}
	got := bpfVIPs(ports, func(k sockKey) (uint32, bool) { i, ok := reg[k]; return i, ok })
	want := []bpf.VIP{{Addr: a, Port: 80, Proto: bpf.TCP, Socket: 0}, {Addr: a, Port: 443, Proto: bpf.TCP, Socket: bpf.NoSocket},
		{Addr: a, Port: 443, Proto: bpf.UDP, Socket: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestMergeDeny(t *testing.T) {
	pp := func(ss ...string) (out []netip.Prefix) {
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	got := mergeDeny(pp("198.51.100.0/24", "192.0.2.1/32"), pp("192.0.2.1/32", "2001:db8::/32", "192.0.2.0/24"))
	want := pp("192.0.2.0/24", "192.0.2.1/32", "198.51.100.0/24", "2001:db8::/32")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestMergeDenyLongAndShort: a short list merged into a long sorted one
// (binary search path) gives what sorting the concatenation gives.
func TestMergeDenyLongAndShort(t *testing.T) {
	var long []netip.Prefix
	for i := range 5000 {
		long = append(long, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24))
	}
	long = append(long, netip.MustParsePrefix("2001:db8::/32"))
	short := []netip.Prefix{netip.MustParsePrefix("2001:db8::/48"), netip.MustParsePrefix("10.0.5.0/24"),
		netip.MustParsePrefix("10.0.5.0/25"), netip.MustParsePrefix("1.2.3.4/32"), netip.MustParsePrefix("1.2.3.4/32"),
		netip.MustParsePrefix("2001:db9::/32")}
	want := slices.Concat(long, short)
	slices.SortFunc(want, comparePrefix)
	want = slices.Compact(want)
	for _, got := range [][]netip.Prefix{mergeDeny(short, long), mergeDeny(long, short)} {
		if !slices.Equal(got, want) {
			t.Fatalf("merge: %d prefixes, want %d", len(got), len(want))
		}
	}
	if got := mergeDeny(nil, long); !slices.Equal(got, long) {
		t.Fatal("merge with an empty list changed the list")
	}
}
