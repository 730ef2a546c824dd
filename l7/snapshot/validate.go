package snapshot

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// ValidationError lists every problem found in a config, one line each.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config has %d problem", len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteByte('s')
	}
	b.WriteByte(':')
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p)
	}
	return b.String()
}

type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// named returns how to refer to the i-th item of a kind in problems, and
// reports a missing or duplicate name.
func (p *problems) named(kind, name string, i int, seen map[string]bool) string {
	where := fmt.Sprintf("%s %q", kind, name)
	if name == "" {
		where = fmt.Sprintf("%s #%d", kind, i+1)
		p.add("%s: name is missing", where)
	} else if seen[name] {
		p.add("%s: duplicate name", where)
	}
	seen[name] = true
	return where
}

// Validate checks a normalised config and reports every problem in one error
// (a *ValidationError), or nil. Call Normalize first.
func Validate(c *Config) error {
	var p problems
	if c.Version.Epoch == 0 {
		p.add("version: epoch must be at least 1")
	}
	switch c.Routing.EncodedSlashes {
	case "reject", "decode":
	default:
		p.add("routing: encoded_slashes %q must be reject or decode", c.Routing.EncodedSlashes)
	}
	if c.Routing.MaxRouteTimeoutMs < 1 || c.Routing.MaxRouteTimeoutMs > HardMaxRouteTimeoutMs {
		p.add("routing: max_route_timeout_ms %d must be between 1 and %d", c.Routing.MaxRouteTimeoutMs, HardMaxRouteTimeoutMs)
	}
	validateListeners(c.Listeners, &p)
	clusters := validateClusters(c.Clusters, &p)
	auth, quota := validatePolicies(c, &p)
	validateRoutes(c, clusters, auth, quota, &p)
	validateCache(c, &p)
	validateTickets(c, &p)
	validateResilience(c, &p)
	validateL4(c, &p)
	validateRegional(c, &p)
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

func validateListeners(ls []Listener, p *problems) {
	if len(ls) == 0 {
		p.add("listeners: at least one listener is required")
	}
	names, addrs := map[string]bool{}, map[string]string{}
	for i, l := range ls {
		where := p.named("listener", l.Name, i, names)
		if _, err := netip.ParseAddrPort(l.Address); err != nil {
			p.add("%s: address %q is not ip:port (port 0 picks a free port)", where, l.Address)
		} else if other, dup := addrs[l.Address]; dup && !strings.HasSuffix(l.Address, ":0") {
			p.add("%s: address %s is also used by listener %q", where, l.Address, other)
		}
		addrs[l.Address] = l.Name
		for _, proto := range l.Protocols {
			switch proto {
			case "http1":
			case "h2", "h3":
				if l.TLS == nil {
					p.add("%s: protocol %s needs tls (cleartext h2c is not served)", where, proto)
				}
			default:
				p.add("%s: unknown protocol %q (want http1, h2 or h3)", where, proto)
			}
		}
		if l.TLS != nil {
			if l.TLS.MinVersion != "1.2" && l.TLS.MinVersion != "1.3" {
				p.add("%s: tls.min_version %q must be 1.2 or 1.3", where, l.TLS.MinVersion)
			}
			if len(l.TLS.Certificates) == 0 {
				p.add("%s: tls needs at least one certificate", where)
			}
			for j, crt := range l.TLS.Certificates {
				if crt.CertFile == "" || crt.KeyFile == "" {
					p.add("%s: certificate #%d needs cert_file and key_file", where, j+1)
				}
			}
		}
		checkRange(p, where, "max_header_bytes", l.MaxHeaderBytes, 1024, 1<<20)
		checkRange(p, where, "read_header_timeout_ms", l.ReadHeaderTimeoutMs, 100, 600_000)
		checkRange(p, where, "idle_timeout_ms", l.IdleTimeoutMs, 100, 3_600_000)
		checkRange(p, where, "max_connections", l.MaxConnections, 1, 10_000_000)
		checkRange(p, where, "h2_max_concurrent_streams", l.H2MaxConcurrentStreams, 1, 10_000)
		checkRange(p, where, "h2_max_resets_per_second", l.H2MaxResetsPerSecond, 1, 100_000)
		switch l.H2Server {
		case "", "std", "rampart":
		default:
			p.add("%s: h2_server %q must be std or rampart", where, l.H2Server)
		}
		checkRange(p, where, "request_body_timeout_ms", l.RequestBodyTimeoutMs, 100, 600_000)
		checkRange(p, where, "tunnel_idle_timeout_ms", l.TunnelIdleTimeoutMs, 1_000, 86_400_000)
		if l.MaxBodyBytes < 0 || l.MaxBodyBytes > 1<<40 {
			p.add("%s: max_body_bytes %d must be between 0 and %d", where, l.MaxBodyBytes, int64(1)<<40)
		}
	}
}

func checkRange(p *problems, where, key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add("%s: %s %d must be between %d and %d", where, key, v, lo, hi)
	}
}

func checkAddress(a string) error {
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		_ = err // netip's text repeats the input; ours says it once
		return fmt.Errorf("%q is not ip:port", a)
	}
	if ap.Port() == 0 {
		return fmt.Errorf("%q: port 0 is not allowed", a)
	}
	return nil
}

func validateClusters(cs []Cluster, p *problems) map[string]bool {
	names := map[string]bool{}
	for i, c := range cs {
		where := p.named("cluster", c.Name, i, names)
		if len(c.Endpoints) == 0 {
			p.add("%s: at least one endpoint is required", where)
		}
		seen := map[string]bool{}
		for _, e := range c.Endpoints {
			if err := checkAddress(e.Address); err != nil {
				p.add("%s: endpoint address: %v", where, err)
			} else if seen[e.Address] {
				p.add("%s: endpoint %s is listed twice", where, e.Address)
			}
			seen[e.Address] = true
			if e.Weight < 1 || e.Weight > 10_000 {
				p.add("%s: endpoint %s weight %d must be between 1 and 10000", where, e.Address, e.Weight)
			}
		}
		checkRange(p, where, "connect_timeout_ms", c.ConnectTimeoutMs, 1, 60_000)
		checkRange(p, where, "max_idle_per_endpoint", c.MaxIdlePerEndpoint, 1, 100_000)
	}
	return names
}

func validateRoutes(c *Config, clusters map[string]bool, auth, quota map[string]*QuotaPolicy, p *problems) {
	type key struct{ host, shape string }
	groups := map[key][]int{}
	var order []key
	ids := map[string]bool{}
	for i, r := range c.Routes {
		where := fmt.Sprintf("route %q", r.ID)
		if r.ID == "" {
			where = fmt.Sprintf("route #%d (path_template %q)", i+1, r.PathTemplate)
			p.add("%s: id is missing", where)
		} else if ids[r.ID] {
			p.add("%s: duplicate id", where)
		}
		ids[r.ID] = true
		if err := checkHost(r.Host); err != nil {
			p.add("%s: host: %v", where, err)
		}
		checkMethods(p, where, r)
		t, err := ParseTemplate(r.PathTemplate)
		var tp *Template
		if err != nil {
			p.add("%s: %v", where, err)
		} else {
			tp = &t
			k := key{r.Host, t.Shape()}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], i)
		}
		if r.BodyRoute == nil {
			checkUpstream(p, where, r, clusters)
		}
		validateMatch(c, p, where, r)
		validateBodyRoute(c, p, where, r)
		switch {
		case r.TimeoutMs == 0:
			p.add("%s: timeout_ms is missing", where)
		case r.TimeoutMs < 0 || r.TimeoutMs > c.Routing.MaxRouteTimeoutMs:
			p.add("%s: timeout_ms %d must be between 1 and %d (routing.max_route_timeout_ms)", where, r.TimeoutMs, c.Routing.MaxRouteTimeoutMs)
		}
		checkRetries(p, where, r)
		validateRoutePolicies(c, p, where, r, tp, auth, quota)
	}
	for _, k := range order {
		reportConflicts(p, c.Routes, groups[k], k.host, k.shape)
	}
}

func checkHost(h string) error {
	if h == "*" {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(h) > 253 {
		return fmt.Errorf("%q is not a host name", h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("%q is not a host name (empty or over-long label)", h)
		}
		for i := 0; i < len(label); i++ {
			ch := label[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
				return fmt.Errorf("%q: byte %q is not allowed (use exact names or a leading *.)", h, ch)
			}
		}
	}
	return nil
}

func checkMethods(p *problems, where string, r Route) {
	seen := map[string]bool{}
	for _, m := range r.Methods {
		if m == "" || strings.ToUpper(m) != m || strings.IndexFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) >= 0 {
			p.add("%s: method %q must be an upper-case token such as GET", where, m)
		}
		if seen[m] {
			p.add("%s: method %s is listed twice", where, m)
		}
		seen[m] = true
	}
	switch r.RequestClass {
	case "read":
		for _, m := range r.Methods {
			if !safeMethod(m) {
				p.add("%s: request_class read cannot serve method %s", where, m)
			}
		}
	case "write":
	default:
		p.add("%s: request_class %q must be read or write", where, r.RequestClass)
	}
	if h, ok := r.IdempotencyKeyHeader(); ok {
		if !validHeaderName(h) {
			p.add("%s: idempotency %q names an invalid header", where, r.Idempotency)
		}
	} else {
		switch r.Idempotency {
		case "safe", "none":
		case "":
			p.add("%s: a write route must declare idempotency (safe, key:<Header> or none)", where)
		default:
			p.add("%s: idempotency %q must be safe, key:<Header> or none", where, r.Idempotency)
		}
	}
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func checkUpstream(p *problems, where string, r Route, clusters map[string]bool) {
	if r.UpstreamCluster == "" {
		p.add("%s: upstream_cluster is missing", where)
	} else if !clusters[r.UpstreamCluster] {
		p.add("%s: unknown upstream_cluster %q", where, r.UpstreamCluster)
	}
	sum := 0
	seen := map[string]bool{}
	for _, s := range r.TrafficSplit {
		if !clusters[s.Revision] && s.Revision != r.UpstreamCluster { // that one is reported above
			p.add("%s: traffic_split names unknown revision %q", where, s.Revision)
		}
		if seen[s.Revision] {
			p.add("%s: traffic_split lists revision %q twice", where, s.Revision)
		}
		seen[s.Revision] = true
		if s.Weight < 0 || s.Weight > 100 {
			p.add("%s: traffic_split weight %d of %q must be between 0 and 100", where, s.Weight, s.Revision)
		}
		sum += s.Weight
	}
	if len(r.TrafficSplit) > 0 && sum != 100 {
		p.add("%s: traffic_split weights sum to %d, not 100", where, sum)
	}
}

func checkRetries(p *problems, where string, r Route) {
	rp := r.RetryPolicy
	if rp == nil {
		return
	}
	if rp.MaxAttempts < 1 || rp.MaxAttempts > MaxRetryAttempts {
		p.add("%s: retry_policy.max_attempts %d must be between 1 and %d", where, rp.MaxAttempts, MaxRetryAttempts)
	}
	for _, s := range rp.RetryableStatuses {
		if s < 400 || s > 599 {
			p.add("%s: retry_policy status %d is not a 4xx or 5xx code", where, s)
		}
	}
	if rp.MaxAttempts > 1 && r.RequestClass == "write" && r.Idempotency == "none" {
		p.add("%s: retries (max_attempts %d) on a write whose idempotency is none", where, rp.MaxAttempts)
	}
}

// reportConflicts names every pair of routes in one (host, shape) group whose
// methods overlap and whose matchers conflict (MatchConflict): such routes
// match the same request with equal precedence.
func reportConflicts(p *problems, routes []Route, idx []int, host, shape string) {
	for a := 0; a < len(idx); a++ {
		for b := a + 1; b < len(idx); b++ {
			ra, rb := routes[idx[a]], routes[idx[b]]
			if common := overlap(ra.Methods, rb.Methods); common != "" && MatchConflict(ra.Match, rb.Match) {
				p.add("routes %q and %q conflict: both match %s %s%s with the same precedence",
					ra.ID, rb.ID, common, host, shape)
			}
		}
	}
}

// overlap returns the methods both lists accept ("any method" for two empty
// lists), or "" when they are disjoint. An empty list accepts every method.
func overlap(a, b []string) string {
	switch {
	case len(a) == 0 && len(b) == 0:
		return "any method"
	case len(a) == 0:
		return strings.Join(b, ",")
	case len(b) == 0:
		return strings.Join(a, ",")
	}
	var both []string
	for _, m := range a {
		for _, n := range b {
			if m == n {
				both = append(both, m)
			}
		}
	}
	sort.Strings(both)
	return strings.Join(both, ",")
}
