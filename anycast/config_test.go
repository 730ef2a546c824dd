package anycast

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidConfig(t *testing.T) {
	c, err := ParseYAML(readTestdata(t, "valid.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *c.Guard.MinSites != 1 || *c.Drain.Prepend != 3 || c.Peers[0].KeepaliveS != 3 || len(c.Inputs) != 5 {
		t.Fatalf("decoded %+v", c)
	}
	if _, err := New(*c, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidConfigReportsEveryProblem(t *testing.T) {
	_, err := ParseYAML(readTestdata(t, "invalid.yaml"))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %v", err)
	}
	got := err.Error() + "\n"
	path := filepath.Join("testdata", "invalid.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("invalid.golden differs.\n--- got ---\n%s--- want ---\n%s", got, want)
	}
}

func TestConfigRefusals(t *testing.T) {
	base := string(readTestdata(t, "valid.yaml"))
	for _, tc := range []struct{ name, from, to, want string }{
		{"empty vip list", "vips:\n  - prefix: 203.0.113.10/32\n    inputs: [upstreams_api, probe_api]\n    communities: [\"64500:100\"]\n    large_communities: [\"64500:7:1\"]\n    med: 10\n  - prefix: 2001:db8:10::/48\n    inputs: [upstreams_api]\n", "vips: []\n", "a config without VIPs would withdraw them all"},
		{"min_sites 0", "min_sites: 1", "min_sites: 0", "0 would let every site withdraw at once"},
		{"min_sites = sites", "min_sites: 1", "min_sites: 3", "no site could ever withdraw"},
		{"min_sites > sites", "min_sites: 1", "min_sites: 5", "no site could ever withdraw"},
		{"no community asn", "community_asn: 64512", "community_asn: 0", "community_asn is required"},
		{"v6 without next hop", "next_hop_v6: 2001:db8:ffff::1", "next_hop_v6: \"\"", "needs next_hop"},
		{"unknown key", "dry_run: off", "dry_run: off\ndryrun: on", "field dryrun not found"},
		{"duplicate key", "dry_run: off", "dry_run: off\ndry_run: off", "already defined"},
		{"two documents", "dry_run: off", "dry_run: off\n---\nx: 1", "more than one YAML document"},
		{"drain below 3 samples", "time_ms: 30000", "time_ms: 2000", "at least 3 × sample_interval_ms"},
		{"host bits", "203.0.113.10/32", "203.0.113.10/24", "masked"},
		{"guard community reused", "\"64500:7:1\"", "\"64512:7:1\"", "reserved for the site community"},
		{"graceful shutdown configured", "\"64500:100\"", "\"65535:0\"", "added by the drain"},
		{"http timeout over the interval", "timeout_ms: 500", "timeout_ms: 5000", "timeout_ms 5000 must be between 10 and 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.from, tc.to, 1)
			if src == base {
				t.Fatalf("%q not in valid.yaml", tc.from)
			}
			_, err := ParseYAML([]byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseYAML(nil); err == nil {
		t.Fatal("empty config accepted")
	}
	c := unitConfig(1)
	c.Peers = nil
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "at least one peer") {
		t.Fatalf("no peers: %v", err)
	}
	c.DryRun = DryRunNoBGP
	if err := c.Validate(); err != nil {
		t.Fatalf("no peers with dry_run no_bgp: %v", err)
	}
}

func TestNewRefusesAGuardThatCannotSee(t *testing.T) {
	c := unitConfig(1)
	f := false
	c.Guard.LearnFromBGP = &f
	if _, err := New(c, Options{}); err == nil || !strings.Contains(err.Error(), "no way to see other sites") {
		t.Fatalf("got %v", err)
	}
	if _, err := New(c, Options{Fleet: func(p netip.Prefix) []SiteRoute { return nil }}); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseYAML(f *testing.F) {
	f.Add(readTestdata(f, "valid.yaml"))
	f.Add(readTestdata(f, "invalid.yaml"))
	f.Add([]byte("local_as: 1\nvips: [{prefix: '::/0'}]\nguard: {min_sites: -1}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseYAML(data)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) && len(ve.Problems) == 0 {
				t.Fatal("a ValidationError without problems")
			}
			return
		}
		// A config that validates builds an announcer, and normalising
		// it again changes nothing that Validate objects to.
		c.Normalize()
		if err := c.Validate(); err != nil {
			t.Fatalf("valid config invalid after a second Normalize: %v", err)
		}
		if _, err := New(*c, Options{Fleet: func(netip.Prefix) []SiteRoute { return nil }}); err != nil {
			t.Fatalf("New refused a valid config: %v", err)
		}
	})
}
