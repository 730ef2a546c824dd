package snapshot

import "fmt"

// RouteCache turns on the response cache for a route (l7/cache).
type RouteCache struct {
	// TTLMs is the freshness lifetime of a response that gives none
	// (no max-age, s-maxage or Expires). 0 takes the default 60000; 1..86400000.
	TTLMs int `yaml:"ttl_ms" json:"ttl_ms"`
	// MaxObjectBytes: a larger response streams through uncached.
	// Default 1 MiB; 1..64 MiB.
	MaxObjectBytes int `yaml:"max_object_bytes" json:"max_object_bytes"`
	// StaleWhileRevalidateMs: a stale object is served this long past
	// its freshness while one request revalidates it. Default 0; 0..86400000.
	StaleWhileRevalidateMs int `yaml:"stale_while_revalidate_ms" json:"stale_while_revalidate_ms"`
	// StaleIfErrorMs: a stale object is served this long past its
	// freshness when the upstream fails (error, 5xx, unreachable).
	// Default 0; 0..86400000.
	StaleIfErrorMs int `yaml:"stale_if_error_ms" json:"stale_if_error_ms"`
	// Shared: on an authenticated route, one object serves every tenant
	// (the key leaves the tenant out). Default false.
	Shared bool `yaml:"shared" json:"shared"`
}

// Defaults and bounds of the cache settings.
const (
	DefaultCacheTTLMs          = 60_000
	DefaultCacheMaxObjectBytes = 1 << 20
	MaxCacheObjectBytes        = 64 << 20
	MaxCacheWindowMs           = 86_400_000
	DefaultCacheMaxBytes       = 256 << 20
	MinCacheMaxBytes           = 1 << 20
	MaxCacheMaxBytes           = 64 << 30
)

func normalizeCache(c *Config) {
	for i := range c.Routes {
		rc := c.Routes[i].Cache
		if rc == nil {
			continue
		}
		setDefault(&rc.TTLMs, DefaultCacheTTLMs)
		setDefault(&rc.MaxObjectBytes, DefaultCacheMaxObjectBytes)
	}
}

func validateCache(c *Config, p *problems) {
	if c.Limits.CacheMaxBytes != 0 {
		checkRange(p, "limits", "cache_max_bytes", c.Limits.CacheMaxBytes, MinCacheMaxBytes, MaxCacheMaxBytes)
	}
	for i, r := range c.Routes {
		rc := r.Cache
		if rc == nil {
			continue
		}
		where := routeWhere(i, r) + ": cache"
		checkRange(p, where, "ttl_ms", rc.TTLMs, 1, MaxCacheWindowMs)
		checkRange(p, where, "max_object_bytes", rc.MaxObjectBytes, 1, MaxCacheObjectBytes)
		checkRange(p, where, "stale_while_revalidate_ms", rc.StaleWhileRevalidateMs, 0, MaxCacheWindowMs)
		checkRange(p, where, "stale_if_error_ms", rc.StaleIfErrorMs, 0, MaxCacheWindowMs)
		if r.BodyRoute != nil {
			p.add("%s: a body-routing route cannot cache (the chosen route's cache applies)", where)
		}
		if rc.Shared && r.AuthPolicyID == "" {
			p.add("%s: shared is only for authenticated routes (auth_policy_id); an unauthenticated route's cache is shared already", where)
		}
		if len(r.Methods) > 0 {
			get := false
			for _, m := range r.Methods {
				get = get || m == "GET" || m == "HEAD"
			}
			if !get {
				p.add("%s: the route serves no GET or HEAD, so nothing would be cached", where)
			}
		}
	}
}

func routeWhere(i int, r Route) string {
	if r.ID == "" {
		return fmt.Sprintf("route #%d", i+1)
	}
	return fmt.Sprintf("route %q", r.ID)
}

// CacheBytes is limits.cache_max_bytes with its default (0: 256 MiB).
func (l Limits) CacheBytes() int64 {
	if l.CacheMaxBytes == 0 {
		return DefaultCacheMaxBytes
	}
	return int64(l.CacheMaxBytes)
}
