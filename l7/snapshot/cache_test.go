package snapshot

import (
	"strings"
	"testing"
)

func TestCacheValidation(t *testing.T) {
	cached := func(c *Config, rc *RouteCache) *Route {
		r := byID(c, "me")
		r.Cache = rc
		return r
	}
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string // a substring of the error; "" means valid
	}{
		{"valid defaults", func(c *Config) { cached(c, &RouteCache{}) }, ""},
		{"valid full", func(c *Config) {
			cached(c, &RouteCache{TTLMs: 5000, MaxObjectBytes: 4096, StaleWhileRevalidateMs: 1000, StaleIfErrorMs: 60000})
		}, ""},
		{"ttl over", func(c *Config) { cached(c, &RouteCache{TTLMs: MaxCacheWindowMs + 1}) }, `route "me": cache: ttl_ms 86400001 must be between 1 and 86400000`},
		{"ttl negative", func(c *Config) { cached(c, &RouteCache{TTLMs: -1}) }, `route "me": cache: ttl_ms -1`},
		{"object over", func(c *Config) { cached(c, &RouteCache{MaxObjectBytes: MaxCacheObjectBytes + 1}) }, `route "me": cache: max_object_bytes 67108865`},
		{"swr negative", func(c *Config) { cached(c, &RouteCache{StaleWhileRevalidateMs: -5}) }, `stale_while_revalidate_ms -5`},
		{"sie over", func(c *Config) { cached(c, &RouteCache{StaleIfErrorMs: MaxCacheWindowMs + 1}) }, `stale_if_error_ms 86400001`},
		{"shared without auth", func(c *Config) { r := cached(c, &RouteCache{Shared: true}); r.AuthPolicyID = "" }, `shared is only for authenticated routes`},
		{"no GET", func(c *Config) {
			r := cached(c, &RouteCache{})
			r.Methods = []string{"POST"}
			r.RequestClass = "write"
			r.Idempotency = "none"
		}, `serves no GET or HEAD`},
		{"limit under", func(c *Config) { c.Limits.CacheMaxBytes = 1000 }, `limits: cache_max_bytes 1000 must be between 1048576`},
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
	c := loadTestConfig(t, "valid.yaml")
	cached(c, &RouteCache{})
	Normalize(c)
	if rc := byID(c, "me").Cache; rc.TTLMs != DefaultCacheTTLMs || rc.MaxObjectBytes != DefaultCacheMaxObjectBytes {
		t.Fatalf("defaults not applied: %+v", rc)
	}
	if c.Limits.CacheBytes() != DefaultCacheMaxBytes {
		t.Fatalf("cache_max_bytes default: %d", c.Limits.CacheBytes())
	}
}
