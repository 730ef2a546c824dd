package nodeconfig

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/anycast"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// renderText is every rendered file, named, in order: what the golden files hold.
func renderText(t *testing.T, c *Config) string {
	t.Helper()
	files, err := c.Render("/etc/rampart")
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	var b strings.Builder
	for _, f := range files {
		mode := "0644"
		if f.Secret {
			mode = "0640"
		}
		b.WriteString("=== " + f.Name + " " + mode + "\n")
		b.Write(f.Data)
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update after checking)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestRenderGolden(t *testing.T) {
	for _, name := range []string{"full", "minimal", "token-file"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			c, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			golden(t, name+".golden", renderText(t, c))
		})
	}
}

func TestInvalidGolden(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data)
	if err == nil {
		t.Fatal("invalid.yaml accepted")
	}
	golden(t, "invalid.golden", err.Error()+"\n")
}

// The rendered anycast config is one the agent's reader accepts as is.
func TestRenderedAnycastParses(t *testing.T) {
	for _, name := range []string{"full", "token-file"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		files, err := c.Render("/etc/rampart")
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, f := range files {
			if f.Name != AnycastYML {
				continue
			}
			found = true
			ac, err := anycast.ParseYAML(f.Data)
			if name == "token-file" {
				// No VIPs of its own: the agent adds the snapshot's, and so
				// accepts it; the bare file alone is refused for having none.
				if err == nil || !strings.Contains(err.Error(), "vip") {
					t.Fatalf("%s: want a no-VIP refusal of the bare file, got %v", name, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: anycast.ParseYAML: %v", name, err)
			}
			if ac.LocalAS != c.BGP.LocalAS || len(ac.Peers) != len(c.BGP.Peers) || len(ac.VIPs) != len(c.VIPs) {
				t.Fatalf("%s: anycast config %+v does not carry node.yaml's bgp section", name, ac)
			}
			if ac.Peers[0].Password != "s3cret" || *ac.Guard.MinSites != 2 || ac.Guard.Sites != 5 {
				t.Fatalf("%s: password, min_sites or sites lost: %+v %+v", name, ac.Peers[0], ac.Guard)
			}
		}
		if !found {
			t.Fatalf("%s: no %s rendered", name, AnycastYML)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	base := "node: {id: n1, region: r1}\ninterfaces: [eth0]\n"
	bgp := "bgp: {local_as: 65001, router_id: 192.0.2.2, site_id: 1, community_asn: 65001, peers: [{address: 192.0.2.1, as: 65000}]}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "", "empty"},
		{"unknown key", base + "colour: blue\n", "field colour not found"},
		{"unknown nested key", "node: {id: n1, region: r1, rack: 4}\ninterfaces: [eth0]\n", "field rack not found"},
		{"duplicate key", base + "interfaces: [eth1]\n", "already defined"},
		{"second document", base + "---\n" + base, "more than one YAML document"},
		{"no id", "node: {region: r1}\ninterfaces: [eth0]\n", "node.id: required"},
		{"no region", "node: {id: n1}\ninterfaces: [eth0]\n", "node.region: required"},
		{"bad zone", "node: {id: n1, region: r1, zone: 'a$b'}\ninterfaces: [eth0]\n", `node.zone "a$b"`},
		{"no interfaces", "node: {id: n1, region: r1}\n", "interfaces: at least one"},
		{"interface with a slash", "node: {id: n1, region: r1}\ninterfaces: [eth/0]\n", `interfaces[0] "eth/0"`},
		{"xdp mode", base + "xdp_mode: offload\n", `xdp_mode "offload"`},
		{"control without url", base + "control: {token: t}\n", "control.url: required"},
		{"control url with query", base + "control: {url: 'https://c.example/?a=b', token: t}\n", "no user, query or fragment"},
		{"control without token", base + "control: {url: https://c.example}\n", "token or token_file required"},
		{"token with space", base + "control: {url: https://c.example, token: 'a b'}\n", "control.token: must be one line"},
		{"relative ca", base + "control: {url: https://c.example, token: t, ca_file: ca.pem}\n", `control.ca_file "ca.pem"`},
		{"key without cert", base + "control: {url: https://c.example, token: t, key_file: /k}\n", "cert_file and key_file go together"},
		{"bad public key", base + "snapshot_public_key: nope\n", "snapshot_public_key:"},
		{"vips without bgp", base + "vips: [203.0.113.1/32]\n", "a bgp section is required"},
		{"bgp without peers", base + "bgp: {local_as: 65001, router_id: 192.0.2.2, site_id: 1, community_asn: 65001}\n", "peers: at least one peer is required"},
		{"bgp without community", base + "bgp: {local_as: 65001, router_id: 192.0.2.2, site_id: 1, peers: [{address: 192.0.2.1, as: 65000}]}\n", "community_asn is required"},
		{"bad vip", base + bgp + "vips: [203.0.113.1/40]\n", "203.0.113.1/40"},
		{"arg with space", base + "proxy_args: ['-drain-timeout 60s']\n", `proxy_args[0] "-drain-timeout 60s"`},
		{"arg with dollar", base + "agent_args: [-x, '$HOME']\n", `agent_args[1] "$HOME"`},
		{"args not starting with a flag", base + "agent_args: [eth1]\n", `agent_args[0] "eth1": want a flag first`},
		{"too big", base + "# " + strings.Repeat("x", MaxBytes) + "\n", "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.yaml)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// The image's sample and test files are valid node files.
func TestImageNodeFiles(t *testing.T) {
	for _, p := range []string{"../images/rootfs/node.yaml.example", "../images/rootfs/test/node.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(data); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestWrite(t *testing.T) {
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := c.Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	wrote, err := Write(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != len(files) {
		t.Fatalf("first write wrote %v of %d files", wrote, len(files))
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if f.Secret {
			want = 0o640
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", f.Name, fi.Mode().Perm(), want)
		}
	}
	// An env file's other lines (the package's comments and GOMEMLIMIT)
	// survive; only RAMPART_ARGS is replaced.
	proxyEnv := filepath.Join(dir, ProxyEnv)
	shipped := "# shipped comment\nRAMPART_ARGS=-old\nGOMEMLIMIT=3600MiB\nRAMPART_ARGS=-older\n"
	if err := os.WriteFile(proxyEnv, []byte(shipped), 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote, err = Write(dir, files); err != nil || len(wrote) != 1 || wrote[0] != ProxyEnv {
		t.Fatalf("rewrite over the shipped proxy.env: wrote %v, err %v", wrote, err)
	}
	got, err := os.ReadFile(proxyEnv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(got), "\n")
	if len(lines) != 4 || lines[0] != "# shipped comment" || !strings.HasPrefix(lines[1], "RAMPART_ARGS=-handoff-socket ") ||
		lines[2] != "GOMEMLIMIT=3600MiB" || lines[3] != "" {
		t.Fatalf("merged proxy.env:\n%s", got)
	}
	// The same config again changes nothing; a changed one rewrites only
	// what changed.
	if wrote, err = Write(dir, files); err != nil || len(wrote) != 0 {
		t.Fatalf("second write: wrote %v, err %v", wrote, err)
	}
	c.Node.Zone = "fra1-b"
	if files, err = c.Render(dir); err != nil {
		t.Fatal(err)
	}
	if wrote, err = Write(dir, files); err != nil || len(wrote) != 1 || wrote[0] != ProxyEnv {
		t.Fatalf("zone change: wrote %v, err %v; want only %s", wrote, err, ProxyEnv)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(files) {
		t.Fatalf("directory holds %d entries (temporary files left?), want %d", len(entries), len(files))
	}
	if _, err := Write(filepath.Join(dir, "missing"), files); err == nil || !strings.Contains(err.Error(), "output directory") {
		t.Fatalf("missing directory: %v", err)
	}
}
