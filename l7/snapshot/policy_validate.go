package snapshot

import (
	"encoding/hex"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"
)

// Defaults of the auth and quota settings.
const (
	DefaultJWKSRefreshMs       = 300_000
	DefaultJWKSMaxStaleMs      = 3_600_000
	DefaultUnknownKidRefetchMs = 30_000
	DefaultLeewayMs            = 30_000
	DefaultRedisTimeoutMs      = 50
	DefaultLeaseTTLMs          = 10_000
	DefaultRebalanceMs         = 2_000
)

// DefaultJWTTypes are the token types a JWT policy accepts when its
// allowed_types is empty.
var DefaultJWTTypes = []string{"JWT", "at+jwt"}

// MaxJWTTypes bounds jwt.allowed_types.
const MaxJWTTypes = 8

// CanonicalJWTType is the form in which "typ" values compare: lower case,
// without an "application/" prefix when no other "/" follows (RFC 7515
// §4.1.9: "example" means "application/example").
func CanonicalJWTType(t string) string {
	t = strings.ToLower(t)
	if rest, ok := strings.CutPrefix(t, "application/"); ok && !strings.Contains(rest, "/") {
		return rest
	}
	return t
}

// validMediaType reports whether t is "type/subtype" or a bare subtype,
// each an RFC 6838 restricted name, without parameters.
func validMediaType(t string) bool {
	if len(t) == 0 || len(t) > 255 {
		return false
	}
	parts := strings.Split(t, "/")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if len(p) == 0 || len(p) > 127 || !isAlnum(p[0]) {
			return false
		}
		for i := 1; i < len(p); i++ {
			if c := p[i]; !isAlnum(c) && !strings.ContainsRune("!#$&-^_.+", rune(c)) {
				return false
			}
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func validateJWTTypes(p *problems, where string, types []string) {
	if len(types) > MaxJWTTypes {
		p.add("%s: jwt.allowed_types has %d entries, at most %d", where, len(types), MaxJWTTypes)
	}
	seen := map[string]string{}
	for _, t := range types {
		if !validMediaType(t) {
			p.add("%s: jwt.allowed_types: %q is not a media type (type/subtype or subtype, no parameters)", where, t)
			continue
		}
		c := CanonicalJWTType(t)
		if first, dup := seen[c]; dup {
			p.add("%s: jwt.allowed_types: %q and %q are the same type", where, first, t)
			continue
		}
		seen[c] = t
	}
}

// JWTAlgorithms are the algorithms a JWT policy may pin.
var JWTAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA", "HS256", "HS384", "HS512"}

func normalizePolicies(c *Config) {
	for i := range c.AuthPolicies {
		ap := &c.AuthPolicies[i]
		if j := ap.JWT; j != nil {
			setDefault(&j.JWKSRefreshMs, DefaultJWKSRefreshMs)
			setDefault(&j.JWKSMaxStaleMs, DefaultJWKSMaxStaleMs)
			setDefault(&j.UnknownKidRefetchMs, DefaultUnknownKidRefetchMs)
			setDefault(&j.LeewayMs, DefaultLeewayMs)
			setDefaultString(&j.Header, "Authorization")
			setDefaultString(&j.TenantClaim, "tenant")
			setDefaultString(&j.ScopesClaim, "scope")
		}
		if k := ap.APIKey; k != nil {
			setDefaultString(&k.Header, "X-Api-Key")
			for n := range k.Keys {
				k.Keys[n].SHA256 = strings.ToLower(k.Keys[n].SHA256)
			}
		}
	}
	ih := &c.IdentityHeaders
	setDefaultString(&ih.Tenant, "X-Rampart-Tenant")
	setDefaultString(&ih.Subject, "X-Rampart-Subject")
	setDefaultString(&ih.KeyID, "X-Rampart-Key-Id")
	setDefaultString(&ih.Scopes, "X-Rampart-Scopes")
	for i := range c.QuotaPolicies {
		q := &c.QuotaPolicies[i]
		setDefaultString(&q.Store, "local")
		if g := q.Global; g != nil {
			setDefault(&g.LeaseTTLMs, DefaultLeaseTTLMs)
			setDefault(&g.RebalanceMs, DefaultRebalanceMs)
		}
		if r := q.Redis; r != nil {
			setDefault(&r.TimeoutMs, DefaultRedisTimeoutMs)
			setDefaultString(&r.Prefix, "rampart:quota:")
		}
	}
}

func setDefaultString(v *string, d string) {
	if *v == "" {
		*v = d
	}
}

// validatePolicies checks auth and quota policies and what routes ask of
// them; it returns the policy ids for the route checks.
func validatePolicies(c *Config, p *problems) (auth, quota map[string]*QuotaPolicy) {
	authIDs := map[string]bool{}
	for i, ap := range c.AuthPolicies {
		where := p.named("auth policy", ap.ID, i, authIDs)
		switch {
		case ap.Type == "jwt" && ap.JWT != nil && ap.APIKey == nil:
			validateJWT(p, where, ap.JWT)
		case ap.Type == "api_key" && ap.APIKey != nil && ap.JWT == nil:
			validateAPIKeys(p, where, ap.APIKey)
		default:
			p.add("%s: type must be jwt (with a jwt block) or api_key (with an api_key block), and only that block", where)
		}
	}
	ih := c.IdentityHeaders
	seen := map[string]bool{}
	for _, h := range []string{ih.Tenant, ih.Subject, ih.KeyID, ih.Scopes} {
		if !validHeaderName(h) {
			p.add("identity_headers: %q is not a header name", h)
		}
		if seen[strings.ToLower(h)] {
			p.add("identity_headers: %q is used twice", h)
		}
		seen[strings.ToLower(h)] = true
	}
	quotaIDs := map[string]bool{}
	quota = map[string]*QuotaPolicy{}
	for i := range c.QuotaPolicies {
		q := &c.QuotaPolicies[i]
		where := p.named("quota policy", q.ID, i, quotaIDs)
		validateQuota(p, where, q, len(c.Regions))
		quota[q.ID] = q
	}
	auth = map[string]*QuotaPolicy{}
	for id := range authIDs {
		auth[id] = nil
	}
	return auth, quota
}

func validateJWT(p *problems, where string, j *JWTPolicy) {
	if j.Issuer == "" {
		p.add("%s: jwt.issuer is missing", where)
	}
	if len(j.Audiences) == 0 {
		p.add("%s: jwt.audiences needs at least one audience", where)
	}
	if len(j.Algorithms) == 0 {
		p.add("%s: jwt.algorithms must pin at least one algorithm", where)
	}
	hmac, asym := false, false
	for _, a := range j.Algorithms {
		switch {
		case strings.EqualFold(a, "none"):
			p.add("%s: jwt.algorithms may not allow \"none\"", where)
		case !slices.Contains(JWTAlgorithms, a):
			p.add("%s: jwt.algorithms: unknown algorithm %q", where, a)
		case strings.HasPrefix(a, "HS"):
			hmac = true
		default:
			asym = true
		}
	}
	if hmac && asym {
		p.add("%s: jwt.algorithms mixes HMAC and public-key algorithms; use two policies", where)
	}
	switch {
	case (j.JWKSURL == "") == (j.JWKSFile == ""):
		p.add("%s: exactly one of jwt.jwks_url and jwt.jwks_file is required", where)
	case j.JWKSURL != "":
		if u, err := url.Parse(j.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p.add("%s: jwt.jwks_url %q must be an http(s) URL", where, j.JWKSURL)
		}
		if hmac {
			p.add("%s: HMAC secrets are never fetched from a URL; use jwt.jwks_file", where)
		}
	}
	checkRange(p, where, "jwt.jwks_refresh_ms", j.JWKSRefreshMs, 1000, 86_400_000)
	checkRange(p, where, "jwt.jwks_max_stale_ms", j.JWKSMaxStaleMs, j.JWKSRefreshMs, 604_800_000)
	checkRange(p, where, "jwt.unknown_kid_refetch_ms", j.UnknownKidRefetchMs, 1000, 86_400_000)
	checkRange(p, where, "jwt.leeway_ms", j.LeewayMs, 0, 300_000)
	if !validHeaderName(j.Header) {
		p.add("%s: jwt.header %q is not a header name", where, j.Header)
	}
	if j.TenantClaim == "" || j.ScopesClaim == "" {
		p.add("%s: jwt.tenant_claim and jwt.scopes_claim may not be empty", where)
	}
	validateJWTTypes(p, where, j.AllowedTypes)
}

func validateAPIKeys(p *problems, where string, k *APIKeyPolicy) {
	if !validHeaderName(k.Header) {
		p.add("%s: api_key.header %q is not a header name", where, k.Header)
	}
	if len(k.Keys) == 0 {
		p.add("%s: api_key.keys needs at least one key", where)
	}
	ids, hashes := map[string]bool{}, map[string]bool{}
	for i, key := range k.Keys {
		kw := p.named(where+": key", key.ID, i, ids)
		if b, err := hex.DecodeString(key.SHA256); err != nil || len(b) != 32 {
			p.add("%s: sha256 must be 64 hex digits (the SHA-256 of the key, never the key)", kw)
		} else if hashes[key.SHA256] {
			p.add("%s: the same key hash appears twice", kw)
		}
		hashes[key.SHA256] = true
	}
}

func validateQuota(p *problems, where string, q *QuotaPolicy, regions int) {
	if len(q.Key) == 0 {
		p.add("%s: key needs at least one part", where)
	}
	for _, part := range q.Key {
		kind, arg, _ := strings.Cut(part, ":")
		switch kind {
		case "tenant", "api_key", "client_ip":
			if arg != "" {
				p.add("%s: key part %q takes no argument", where, part)
			}
		case "claim", "param":
			if arg == "" {
				p.add("%s: key part %q needs a name", where, part)
			}
		case "header":
			if !validHeaderName(arg) {
				p.add("%s: key part %q needs a header name", where, part)
			}
		default:
			p.add("%s: unknown key part %q (tenant, api_key, client_ip, claim:<name>, header:<Name>, param:<name>)", where, part)
		}
	}
	if q.Global != nil {
		validateGlobal(p, where, q, regions)
	} else if q.Regional != nil {
		r := q.Regional
		if !(r.GlobalRatePerSecond > 0) || math.IsInf(r.GlobalRatePerSecond, 0) {
			p.add("%s: regional.global_rate_per_second must be above 0", where)
		}
		sum := 0.0
		for _, region := range slices.Sorted(maps.Keys(r.Shares)) {
			share := r.Shares[region]
			if region == "" || !(share >= 0 && share <= 1) {
				p.add("%s: regional share %q = %v must be a region and a share between 0 and 1", where, region, share)
			}
			sum += share
		}
		if len(r.Shares) == 0 || sum > 1.000001 {
			p.add("%s: regional.shares must name regions and sum to at most 1 (they sum to %.3f)", where, sum)
		}
		if q.RatePerSecond != 0 {
			p.add("%s: rate_per_second comes from regional shares; leave it out", where)
		}
	} else if !(q.RatePerSecond > 0) || math.IsInf(q.RatePerSecond, 0) || q.RatePerSecond > 1e9 {
		p.add("%s: rate_per_second %v must be above 0", where, q.RatePerSecond)
	}
	if q.Global == nil {
		checkRange(p, where, "burst", q.Burst, 1, 1_000_000_000)
	}
	switch q.Store {
	case "local":
		if q.Redis != nil {
			p.add("%s: a redis block needs store: redis", where)
		}
	case "redis":
		if q.Redis == nil {
			p.add("%s: store redis needs a redis block", where)
			break
		}
		if err := checkAddress(q.Redis.Address); err != nil && !validHostPortName(q.Redis.Address) {
			p.add("%s: redis.address %q must be host:port", where, q.Redis.Address)
		}
		checkRange(p, where, "redis.timeout_ms", q.Redis.TimeoutMs, 1, 5000)
		if q.Redis.FailMode != "open" && q.Redis.FailMode != "closed" {
			p.add("%s: redis.fail_mode %q must be open or closed (say which)", where, q.Redis.FailMode)
		}
	default:
		p.add("%s: store %q must be local or redis", where, q.Store)
	}
}

// validateGlobal checks a global budget; regions is how many regions the
// config lists (0: none listed, the floor's total is not checked).
func validateGlobal(p *problems, where string, q *QuotaPolicy, regions int) {
	g := q.Global
	if q.Regional != nil {
		p.add("%s: global and regional are exclusive; a global budget is split by leases, not fixed shares", where)
	}
	if q.RatePerSecond != 0 || q.Burst != 0 {
		p.add("%s: rate_per_second and burst come from the region's lease under global; leave them out", where)
	}
	if g.RatePerSecond < 1 || g.RatePerSecond > 1_000_000_000 {
		p.add("%s: global.rate_per_second %d is outside 1..1000000000", where, g.RatePerSecond)
	}
	if g.Burst < 1 || g.Burst > 1_000_000_000 {
		p.add("%s: global.burst %d is outside 1..1000000000", where, g.Burst)
	}
	checkRange(p, where, "global.floor_share_percent", g.FloorSharePercent, 0, 100)
	if regions > 0 && g.FloorSharePercent*regions > 100 {
		p.add("%s: global.floor_share_percent %d over %d regions is %d%%, above the whole budget", where, g.FloorSharePercent, regions, g.FloorSharePercent*regions)
	}
	checkRange(p, where, "global.lease_ttl_ms", g.LeaseTTLMs, 1000, 300_000)
	checkRange(p, where, "global.rebalance_ms", g.RebalanceMs, 100, max(100, g.LeaseTTLMs/2))
}

func validHostPortName(a string) bool {
	host, port, ok := strings.Cut(a, ":")
	if !ok || host == "" || port == "" || strings.Contains(port, ":") {
		return false
	}
	for _, ch := range port {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return checkHost(strings.ToLower(host)) == nil
}

// validateRoutePolicies checks what a route asks of auth, quota and header
// rules.
func validateRoutePolicies(c *Config, p *problems, where string, r Route, t *Template, auth map[string]*QuotaPolicy, quota map[string]*QuotaPolicy) {
	if r.AuthPolicyID != "" {
		if _, ok := auth[r.AuthPolicyID]; !ok {
			p.add("%s: unknown auth_policy_id %q", where, r.AuthPolicyID)
		}
	} else if len(r.RequiredScopes) > 0 {
		p.add("%s: required_scopes need an auth_policy_id", where)
	}
	if r.QuotaPolicyID != "" {
		q, ok := quota[r.QuotaPolicyID]
		if !ok {
			p.add("%s: unknown quota_policy_id %q", where, r.QuotaPolicyID)
		} else {
			for _, part := range q.Key {
				kind, arg, _ := strings.Cut(part, ":")
				if (kind == "tenant" || kind == "api_key" || kind == "claim") && r.AuthPolicyID == "" {
					p.add("%s: quota key %q needs an authenticated route", where, part)
				}
				if kind == "param" && t != nil && !slices.Contains(t.Params(), arg) {
					p.add("%s: quota key %q names no parameter of %s", where, part, r.PathTemplate)
				}
			}
		}
	}
	if h := r.Headers; h != nil {
		ih := c.IdentityHeaders
		protected := []string{ih.Tenant, ih.Subject, ih.KeyID, ih.Scopes}
		for _, side := range []struct {
			name string
			ops  HeaderOps
		}{{"request", h.Request}, {"response", h.Response}} {
			check := func(op, name, value string) {
				switch {
				case !validHeaderName(name):
					p.add("%s: headers.%s.%s: %q is not a header name", where, side.name, op, name)
				case hopByHop(name):
					p.add("%s: headers.%s.%s: %q is hop-by-hop and cannot be changed", where, side.name, op, name)
				case side.name == "request" && op != "remove" && slices.ContainsFunc(protected, func(x string) bool { return strings.EqualFold(x, name) }):
					p.add("%s: headers.request.%s: %q carries the verified identity and cannot be set", where, op, name)
				case strings.ContainsAny(value, "\r\n\x00"):
					p.add("%s: headers.%s.%s: the value of %q has a control byte", where, side.name, op, name)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(side.ops.Add)) {
				check("add", k, side.ops.Add[k])
			}
			for _, k := range slices.Sorted(maps.Keys(side.ops.Set)) {
				check("set", k, side.ops.Set[k])
			}
			for _, k := range side.ops.Remove {
				check("remove", k, "")
			}
		}
	}
}

func hopByHop(name string) bool {
	switch strings.ToLower(name) {
	case "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length":
		return true
	}
	return false
}
