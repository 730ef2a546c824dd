package snapshot

import (
	"strings"
	"testing"
)

func TestBodyRouteValidation(t *testing.T) {
	dispatcher := func(c *Config, b *BodyRoute) *Route {
		c.Routes = append(c.Routes, Route{ID: "hooks", Host: "api.example.com", Methods: []string{"POST"},
			PathTemplate: "/hooks", TimeoutMs: 1000, Idempotency: "none", BodyRoute: b})
		return &c.Routes[len(c.Routes)-1]
	}
	good := func() *BodyRoute {
		return &BodyRoute{Field: "data.type", Cases: map[string]string{"user.created": "create-user"}, Default: "me"}
	}
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string // a substring of the error; "" means valid
	}{
		{"valid", func(c *Config) { dispatcher(c, good()) }, ""},
		{"field missing", func(c *Config) { b := good(); b.Field = ""; dispatcher(c, b) }, `body_route: field is missing`},
		{"empty segment", func(c *Config) { b := good(); b.Field = "a..b"; dispatcher(c, b) }, `has an empty segment`},
		{"too deep", func(c *Config) { b := good(); b.Field = "a.b.c.d.e.f.g.h.i"; dispatcher(c, b) }, `9 segments, more than 8`},
		{"size over the bound", func(c *Config) { b := good(); b.MaxBodyBytes = MaxBodyRouteBytes + 1; dispatcher(c, b) }, `max_body_bytes 16777217`},
		{"no cases", func(c *Config) { b := good(); b.Cases = nil; dispatcher(c, b) }, `cases are missing`},
		{"unknown target", func(c *Config) { b := good(); b.Cases["x"] = "nope"; dispatcher(c, b) }, `case "x" names unknown route "nope"`},
		{"unknown default", func(c *Config) { b := good(); b.Default = "nope"; dispatcher(c, b) }, `default names unknown route "nope"`},
		{"itself", func(c *Config) { b := good(); b.Default = "hooks"; dispatcher(c, b) }, `default names the route itself`},
		{"chained", func(c *Config) {
			dispatcher(c, good())
			r := dispatcher(c, &BodyRoute{Field: "x", Cases: map[string]string{"a": "hooks"}})
			r.ID, r.PathTemplate = "hooks-2", "/hooks2"
		}, `names route "hooks", which routes by body itself`},
		{"target with a param quota", func(c *Config) {
			c.QuotaPolicies = append(c.QuotaPolicies, QuotaPolicy{ID: "per-id", Key: []string{"param:id"}, RatePerSecond: 1, Burst: 1})
			byID(c, "me").QuotaPolicyID = "per-id"
			dispatcher(c, good())
		}, `default names route "me", whose quota keys on a path parameter`},
		{"dispatcher with an upstream", func(c *Config) { dispatcher(c, good()).UpstreamCluster = "users-v1" }, `cannot set upstream_cluster`},
		{"dispatcher with auth", func(c *Config) { dispatcher(c, good()).AuthPolicyID = "users-jwt" }, `cannot set auth_policy_id`},
	}
	for _, tc := range cases {
		c := loadTestConfig(t, "valid.yaml")
		tc.mutate(c)
		Normalize(c)
		err := Validate(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
