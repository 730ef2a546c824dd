package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRegionalConfigCompiles(t *testing.T) {
	c := loadTestConfig(t, "regional.yaml")
	canon, err := Compile(c)
	if err != nil {
		t.Fatalf("regional.yaml: %v", err)
	}
	golden(t, "regional.canonical.json", string(canon)+"\n")
	if c.Regional == nil || c.Regional.HintHeader != DefaultHintHeader || c.Regional.RegionStateMaxAgeMs != DefaultRegionStateMaxAgeMs {
		t.Errorf("regional defaults not filled: %+v", c.Regional)
	}
	if got := byID(c, "update-account"); got.MaxReplicaLagMs != DefaultMaxReplicaLagMs || got.MaxSignalAgeMs != DefaultMaxSignalAgeMs {
		t.Errorf("route defaults: lag %d age %d", got.MaxReplicaLagMs, got.MaxSignalAgeMs)
	}
	if got := byID(c, "status"); got.MaxReplicaLagMs != 0 || got.Platform != "" {
		t.Errorf("a route without a platform got regional defaults: %+v", got)
	}
}

func TestRegionalInvalidReportsEveryProblem(t *testing.T) {
	c := loadTestConfig(t, "regional-invalid.yaml")
	_, err := Compile(c)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %v", err)
	}
	golden(t, "regional-invalid.golden", err.Error()+"\n")
}

// A config without regional keys keeps its canonical bytes: no regional
// block appears and no route gains a field.
func TestNoRegionalKeysNoRegionalBytes(t *testing.T) {
	c := loadTestConfig(t, "valid.yaml")
	canon, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"regions"`, `"platforms"`, `"tenants"`, `"hint_header"`, `"platform"`, `"max_replica_lag_ms"`, `"max_signal_age_ms"`} {
		if strings.Contains(string(canon), key) {
			t.Errorf("canonical bytes of a config without regional keys contain %s", key)
		}
	}
	if c.HasRegional() {
		t.Error("HasRegional is true for valid.yaml")
	}
}

func TestRegionalOrderDoesNotMatter(t *testing.T) {
	a := loadTestConfig(t, "regional.yaml")
	b := loadTestConfig(t, "regional.yaml")
	for i, j := 0, len(b.Tenants)-1; i < j; i, j = i+1, j-1 {
		b.Tenants[i], b.Tenants[j] = b.Tenants[j], b.Tenants[i]
	}
	b.Regions[0], b.Regions[2] = b.Regions[2], b.Regions[0]
	b.Platforms[0], b.Platforms[1] = b.Platforms[1], b.Platforms[0]
	b.Tenants[1].AllowedRegions = []string{"us-east", "eu-west", "eu-central"} // initech, reordered
	ca, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Compile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ca) != string(cb) {
		t.Error("reordering regions, platforms, tenants and allowed regions changed the canonical bytes")
	}
}

func TestRegionalValidationCases(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string // a substring of the error; "" means valid
	}{
		{"valid as is", func(c *Config) {}, ""},
		{"max_config_lag 0 is kept", func(c *Config) { z := uint64(0); c.Regional.MaxConfigLag = &z }, ""},
		{"route cluster outside its platform", func(c *Config) { byID(c, "get-account").Platform = "ledger-db" },
			`route "get-account": cluster "accounts" is not a cluster of platform "ledger-db"`},
		{"platform route without auth", func(c *Config) { byID(c, "get-account").AuthPolicyID = "" },
			`route "get-account": platform "accounts-db" needs an auth_policy_id`},
		{"endpoint without region on a platform route", func(c *Config) { c.Clusters[0].Endpoints[0].Region = "" },
			`route "get-account": cluster "accounts" endpoint 10.1.0.1:8080 has no region`},
		{"endpoint in an unknown region", func(c *Config) { c.Clusters[0].Endpoints[0].Region = "ap-south" },
			`cluster "accounts": endpoint 10.1.0.1:8080 names unknown region "ap-south"`},
		{"regional keys without regions", func(c *Config) { c.Regions = nil },
			`regions: the regional policy (platforms, tenants, regional) needs the regions listed`},
		{"weighted tenant without weights is fine", func(c *Config) {}, ""},
		{"weights missing an allowed region", func(c *Config) { delete(c.Tenants[2].Weights, "eu-west") },
			`tenant "initech": weights gives no weight to allowed region "eu-west"`},
		{"too many regions", func(c *Config) {
			for i := range MaxRegions {
				c.Regions = append(c.Regions, RegionDef{Name: fmt.Sprintf("r%d", i)})
			}
		}, `regions: 67 regions, at most 64`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := loadTestConfig(t, "regional.yaml")
			Normalize(c)
			tc.mutate(c)
			Normalize(c)
			err := Validate(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want an error containing %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want an error containing %q, got:\n%v", tc.want, err)
			}
		})
	}
}

// ManyTenants adds n generated tenants to a normalised regional config.
func manyTenants(c *Config, n int) {
	for i := range n {
		t := Tenant{ID: fmt.Sprintf("t%05d", i), PrimaryRegion: "eu-west"}
		switch i % 3 {
		case 1:
			t.AllowedRegions, t.FailoverMode, t.BackupRegion = []string{"eu-west", "eu-central"}, FailoverPrimaryBackup, "eu-central"
		case 2:
			t.AllowedRegions, t.FailoverMode, t.WeightedOptIn = []string{"eu-west", "us-east"}, FailoverWeighted, true
		}
		c.Tenants = append(c.Tenants, t)
	}
}

func TestTenThousandTenantsValidate(t *testing.T) {
	c := loadTestConfig(t, "regional.yaml")
	manyTenants(c, 10_000)
	c.Tenants = append(c.Tenants, Tenant{ID: "t00042", PrimaryRegion: "eu-west"})
	_, err := Compile(c)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0] != `tenant "t00042": duplicate id` {
		t.Fatalf("want exactly the duplicate tenant reported, got %v", err)
	}
}

func BenchmarkCompileTenThousandTenants(b *testing.B) {
	base := loadTestConfig(&testing.T{}, "regional.yaml")
	manyTenants(base, 10_000)
	b.ReportAllocs()
	for b.Loop() {
		c := *base
		c.Tenants = append([]Tenant(nil), base.Tenants...)
		if _, err := Compile(&c); err != nil {
			b.Fatal(err)
		}
	}
}
