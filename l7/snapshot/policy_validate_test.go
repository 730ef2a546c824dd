package snapshot

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCanonicalJWTType(t *testing.T) {
	for in, want := range map[string]string{
		"JWT": "jwt", "at+jwt": "at+jwt", "AT+JWT": "at+jwt", "application/at+jwt": "at+jwt",
		"Application/JWT": "jwt", "application/x/y": "application/x/y", "text/plain": "text/plain",
	} {
		if got := CanonicalJWTType(in); got != want {
			t.Errorf("CanonicalJWTType(%q) = %q, want %q", in, got, want)
		}
	}
}

// jwt.allowed_types is validated; the accepted lists survive compilation
// and an empty one stays out of the canonical bytes.
func TestJWTAllowedTypes(t *testing.T) {
	cases := []struct {
		name  string
		types []string
		want  string // a substring of the error; "" means valid
	}{
		{"absent", nil, ""},
		{"access tokens only", []string{"at+jwt"}, ""},
		{"with the application/ prefix", []string{"application/at+jwt", "JWT"}, ""},
		{"full media type", []string{"application/secevent+jwt"}, ""},
		{"same type twice", []string{"at+jwt", "application/AT+JWT"}, `"at+jwt" and "application/AT+JWT" are the same type`},
		{"empty", []string{""}, `"" is not a media type`},
		{"space", []string{"at jwt"}, `"at jwt" is not a media type`},
		{"parameters", []string{"jwt; charset=utf-8"}, `is not a media type`},
		{"two slashes", []string{"a/b/c"}, `"a/b/c" is not a media type`},
		{"leading symbol", []string{"+jwt"}, `"+jwt" is not a media type`},
		{"too many", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, `jwt.allowed_types has 9 entries, at most 8`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := loadTestConfig(t, "valid.yaml")
			c.AuthPolicies[0].JWT.AllowedTypes = tc.types
			c.AuthPolicies[0].JWT.RequireType = tc.types != nil
			canon, err := Compile(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			case err != nil:
				return
			}
			var back Config
			if err := json.Unmarshal(canon, &back); err != nil {
				t.Fatal(err)
			}
			j := back.AuthPolicies[0].JWT
			if strings.Join(j.AllowedTypes, ",") != strings.Join(tc.types, ",") || j.RequireType != (tc.types != nil) {
				t.Fatalf("canonical form has allowed_types %q require_type %v", j.AllowedTypes, j.RequireType)
			}
			if tc.types == nil && strings.Contains(string(canon), "allowed_types") {
				t.Fatal("an absent allowed_types appears in the canonical bytes")
			}
		})
	}
}

// A global quota policy is validated: bounds, defaults, the floor's total
// over the config's regions, and exclusive with regional shares and with
// a rate of its own.
func TestQuotaGlobal(t *testing.T) {
	good := func() *Global { return &Global{RatePerSecond: 500_000, Burst: 50_000, FloorSharePercent: 10} }
	cases := []struct {
		name    string
		regions int
		edit    func(q *QuotaPolicy)
		want    string // a substring of the error; "" means valid
	}{
		{"valid", 3, func(q *QuotaPolicy) {}, ""},
		{"valid without regions", 0, func(q *QuotaPolicy) { q.Global.FloorSharePercent = 100 }, ""},
		{"with regional", 3, func(q *QuotaPolicy) {
			q.Regional = &Regional{GlobalRatePerSecond: 10, Shares: map[string]float64{"eu-west": 1}}
		}, "global and regional are exclusive"},
		{"own rate", 3, func(q *QuotaPolicy) { q.RatePerSecond = 5 }, "leave them out"},
		{"own burst", 3, func(q *QuotaPolicy) { q.Burst = 5 }, "leave them out"},
		{"zero rate", 3, func(q *QuotaPolicy) { q.Global.RatePerSecond = 0 }, "global.rate_per_second 0 is outside"},
		{"huge rate", 3, func(q *QuotaPolicy) { q.Global.RatePerSecond = 2e9 }, "global.rate_per_second 2000000000 is outside"},
		{"zero burst", 3, func(q *QuotaPolicy) { q.Global.Burst = 0 }, "global.burst 0 is outside"},
		{"floor over 100", 3, func(q *QuotaPolicy) { q.Global.FloorSharePercent = 101 }, "global.floor_share_percent"},
		{"floors over the budget", 3, func(q *QuotaPolicy) { q.Global.FloorSharePercent = 34 }, "over 3 regions is 102%"},
		{"short ttl", 3, func(q *QuotaPolicy) { q.Global.LeaseTTLMs = 500 }, "global.lease_ttl_ms"},
		{"rebalance above half the ttl", 3, func(q *QuotaPolicy) { q.Global.RebalanceMs = 6000 }, "global.rebalance_ms"},
		{"rebalance too fast", 3, func(q *QuotaPolicy) { q.Global.RebalanceMs = 10 }, "global.rebalance_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := loadTestConfig(t, "valid.yaml")
			c.Regions = nil
			for _, r := range []string{"ap-south", "eu-west", "us-east"}[:tc.regions] {
				c.Regions = append(c.Regions, RegionDef{Name: r})
			}
			q := &c.QuotaPolicies[0]
			q.Regional, q.Burst, q.Global = nil, 0, good()
			tc.edit(q)
			canon, err := Compile(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			case err != nil:
				return
			}
			var back Config
			if err := json.Unmarshal(canon, &back); err != nil {
				t.Fatal(err)
			}
			g := back.QuotaPolicies[0].Global
			if g == nil || g.LeaseTTLMs != DefaultLeaseTTLMs || g.RebalanceMs != DefaultRebalanceMs || g.RatePerSecond != 500_000 {
				t.Fatalf("canonical global = %+v, want the defaults filled in", g)
			}
		})
	}
}
