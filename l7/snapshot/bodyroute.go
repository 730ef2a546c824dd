package snapshot

import (
	"fmt"
	"sort"
	"strings"
)

// BodyRoute makes a route a dispatcher: it reads the request's JSON body
// (up to MaxBodyBytes), takes the value of Field (a dotted path into
// objects, such as "event_type" or "data.kind") and hands the request to
// the route Cases names for that value, or to Default. The chosen route's
// stages (auth, quota, header rules) and upstream serve it; the dispatcher
// itself has no upstream and no policies.
type BodyRoute struct {
	Field        string            `yaml:"field" json:"field"`
	MaxBodyBytes int64             `yaml:"max_body_bytes" json:"max_body_bytes,omitempty"` // 0: DefaultBodyRouteBytes
	Cases        map[string]string `yaml:"cases" json:"cases"`
	Default      string            `yaml:"default" json:"default,omitempty"`
}

// Bounds of body routing.
const (
	DefaultBodyRouteBytes = 64 << 10
	MaxBodyRouteBytes     = 16 << 20
	MaxBodyRouteCases     = 1024
	MaxBodyRouteDepth     = 8   // segments of Field
	MaxBodyRouteKeyBytes  = 256 // Field, and each case value
)

// Path splits Field into its segments.
func (b *BodyRoute) Path() []string { return strings.Split(b.Field, ".") }

// Limit is MaxBodyBytes with its default.
func (b *BodyRoute) Limit() int64 {
	if b.MaxBodyBytes == 0 {
		return DefaultBodyRouteBytes
	}
	return b.MaxBodyBytes
}

func validateBodyRoute(c *Config, p *problems, where string, r Route) {
	b := r.BodyRoute
	if b == nil {
		return
	}
	at := where + ": body_route"
	switch {
	case b.Field == "":
		p.add("%s: field is missing", at)
	case len(b.Field) > MaxBodyRouteKeyBytes:
		p.add("%s: field is longer than %d bytes", at, MaxBodyRouteKeyBytes)
	default:
		segs := b.Path()
		if len(segs) > MaxBodyRouteDepth {
			p.add("%s: field %q has %d segments, more than %d", at, b.Field, len(segs), MaxBodyRouteDepth)
		}
		for _, s := range segs {
			if s == "" {
				p.add("%s: field %q has an empty segment", at, b.Field)
				break
			}
		}
	}
	if b.MaxBodyBytes < 0 || b.MaxBodyBytes > MaxBodyRouteBytes {
		p.add("%s: max_body_bytes %d must be between 1 and %d (0: %d)", at, b.MaxBodyBytes, MaxBodyRouteBytes, DefaultBodyRouteBytes)
	}
	if len(b.Cases) == 0 {
		p.add("%s: cases are missing", at)
	}
	if len(b.Cases) > MaxBodyRouteCases {
		p.add("%s: %d cases, more than %d", at, len(b.Cases), MaxBodyRouteCases)
	}
	ids := map[string]*Route{}
	for i := range c.Routes {
		ids[c.Routes[i].ID] = &c.Routes[i]
	}
	target := func(what, id string) {
		t, ok := ids[id]
		switch {
		case id == "":
			p.add("%s: %s names no route", at, what)
		case !ok:
			p.add("%s: %s names unknown route %q", at, what, id)
		case id == r.ID:
			p.add("%s: %s names the route itself", at, what)
		case t.BodyRoute != nil:
			p.add("%s: %s names route %q, which routes by body itself", at, what, id)
		case paramQuota(c, t):
			p.add("%s: %s names route %q, whose quota keys on a path parameter (a handed-over request has the body-routing route's path)", at, what, id)
		}
	}
	values := make([]string, 0, len(b.Cases))
	for v := range b.Cases {
		values = append(values, v)
	}
	sort.Strings(values) // problems in a stable order
	for _, v := range values {
		if len(v) > MaxBodyRouteKeyBytes {
			p.add("%s: case %.40q... is longer than %d bytes", at, v, MaxBodyRouteKeyBytes)
		}
		target(fmt.Sprintf("case %q", v), b.Cases[v])
	}
	if b.Default != "" {
		target("default", b.Default)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"upstream_cluster", r.UpstreamCluster != ""}, {"traffic_split", len(r.TrafficSplit) > 0},
		{"auth_policy_id", r.AuthPolicyID != ""}, {"quota_policy_id", r.QuotaPolicyID != ""},
		{"required_scopes", len(r.RequiredScopes) > 0}, {"headers", r.Headers != nil},
		{"platform", r.Platform != ""}, {"retry_policy", r.RetryPolicy != nil},
		{"max_concurrent_requests", r.MaxConcurrentRequests != 0},
	} {
		if f.set {
			p.add("%s: a body-routing route cannot set %s (the chosen route's applies)", where, f.name)
		}
	}
}

// paramQuota reports whether t's quota policy keys on a path parameter.
func paramQuota(c *Config, t *Route) bool {
	for _, q := range c.QuotaPolicies {
		if q.ID == t.QuotaPolicyID {
			for _, part := range q.Key {
				if strings.HasPrefix(part, "param:") {
					return true
				}
			}
		}
	}
	return false
}
