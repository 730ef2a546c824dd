package agent

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestAnycastVIPs(t *testing.T) {
	addrs := func(ss ...string) (out []netip.Addr) {
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	med := uint32(10)
	exact := anycast.VIP{Prefix: "203.0.113.10/32", Inputs: []string{"probe"}, MED: &med}
	agg := anycast.VIP{Prefix: "198.51.100.0/24", Communities: []string{"64500:1"}}
	other := anycast.VIP{Prefix: "192.0.2.0/24"}
	for _, c := range []struct {
		name   string
		conf   []anycast.VIP
		addrs  []netip.Addr
		want   []anycast.VIP
		unused []string
	}{
		{"nothing", nil, nil, nil, nil},
		{"snapshot VIPs become host prefixes", nil, addrs("203.0.113.11", "2001:db8::10"),
			[]anycast.VIP{{Prefix: "2001:db8::10/128"}, {Prefix: "203.0.113.11/32"}}, nil},
		{"a configured host prefix lends its attributes", []anycast.VIP{exact}, addrs("203.0.113.10", "203.0.113.11"),
			[]anycast.VIP{exact, {Prefix: "203.0.113.11/32"}}, nil},
		{"an aggregate covers its VIPs, no /32 beside it", []anycast.VIP{agg}, addrs("198.51.100.1", "198.51.100.2", "203.0.113.11"),
			[]anycast.VIP{agg, {Prefix: "203.0.113.11/32"}}, nil},
		{"configured VIPs this node does not serve are not announced", []anycast.VIP{exact, other}, addrs("203.0.113.11"),
			[]anycast.VIP{{Prefix: "203.0.113.11/32"}}, []string{"203.0.113.10/32", "192.0.2.0/24"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, unused := anycastVIPs(c.conf, c.addrs)
			if !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(unused, c.unused) {
				t.Fatalf("got %+v unused %v\nwant %+v unused %v", got, unused, c.want, c.unused)
			}
		})
	}
}

func TestUpstreamShare(t *testing.T) {
	metrics := `# HELP rampart_endpoint_healthy 1 when the endpoint passes its active health check.
# TYPE rampart_endpoint_healthy gauge
rampart_endpoint_healthy{cluster="api",endpoint="10.0.0.1:80"} 1
rampart_endpoint_healthy{cluster="api",endpoint="10.0.0.2:80"} 0
rampart_endpoint_healthy{cluster="api",endpoint="10.0.0.3:80"} 1
# TYPE rampart_requests_total counter
rampart_requests_total{route="r"} 7
`
	g, err := parseHealth(strings.NewReader(metrics))
	if err != nil {
		t.Fatal(err)
	}
	hc := &snapshot.HealthCheck{Path: "/healthz"}
	c := &snapshot.Config{Clusters: []snapshot.Cluster{
		{Name: "api", HealthCheck: hc, Endpoints: []snapshot.Endpoint{
			{Address: "10.0.0.1:80", Region: "eu"}, {Address: "10.0.0.2:80", Region: "eu"},
			{Address: "10.0.0.3:80", Region: "us"}, {Address: "10.0.0.4:80"}}}, // .4: checked, no gauge yet
		{Name: "static", Endpoints: []snapshot.Endpoint{{Address: "10.0.1.1:80", Region: "us"}}}, // no checks: healthy
	}}
	for _, x := range []struct {
		region         string
		healthy, total int
	}{{"", 3, 5}, {"eu", 1, 3}, {"us", 2, 3}} {
		if h, tot := upstreamShare(c, g, x.region); h != x.healthy || tot != x.total {
			t.Errorf("region %q: %d/%d, want %d/%d", x.region, h, tot, x.healthy, x.total)
		}
	}
}

func TestReadAnycastConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := `local_as: 65001
router_id: 198.51.100.1
site_id: 1
dry_run: no_bgp
inputs:
  - {name: proxy_ready, kind: bool, global: true}
  - {name: xdp, kind: bool, global: true}
  - {name: snapshot_fresh, kind: age, global: true, max_age_ms: 3600000}
  - {name: upstreams, kind: share, global: true}
guard: {community_asn: 64512}
`
	c, err := ReadAnycastConfig(write("ok.yaml", base))
	if err != nil {
		t.Fatalf("a config without vips (the snapshot's are announced): %v", err)
	}
	if c.SampleIntervalMs != 1000 || len(c.VIPs) != 0 {
		t.Fatalf("defaults not filled or VIPs invented: %+v", c)
	}
	for _, x := range []struct{ name, body, want string }{
		{"unknown key", base + "colour: blue\n", "colour"},
		{"second document", base + "---\nlocal_as: 1\n", "second document"},
		{"no global input", strings.ReplaceAll(base, "global: true", "global: false"), "input"},
		{"no guard community", strings.Replace(base, "guard: {community_asn: 64512}\n", "", 1), "community_asn"},
	} {
		if _, err := ReadAnycastConfig(write(x.name+".yaml", x.body)); err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("%s: %v (want it to mention %q)", x.name, err, x.want)
		}
	}
}
