package snapshot

// AuthPolicy authenticates the requests of the routes that name it.
type AuthPolicy struct {
	ID     string        `yaml:"id" json:"id"`
	Type   string        `yaml:"type" json:"type"` // jwt | api_key
	JWT    *JWTPolicy    `yaml:"jwt" json:"jwt,omitempty"`
	APIKey *APIKeyPolicy `yaml:"api_key" json:"api_key,omitempty"`
}

// JWTPolicy verifies bearer tokens locally against a key set.
type JWTPolicy struct {
	Issuer    string   `yaml:"issuer" json:"issuer"`
	Audiences []string `yaml:"audiences" json:"audiences"` // the token's aud must contain one
	// Algorithms the policy accepts (RS256, RS384, RS512, PS256, ES256,
	// ES384, EdDSA, HS256 ...); a token with another alg, or "none", fails.
	Algorithms []string `yaml:"algorithms" json:"algorithms"`
	// Keys come from exactly one of JWKSURL (fetched and refreshed in the
	// background) or JWKSFile (read when the snapshot is applied).
	JWKSURL  string `yaml:"jwks_url" json:"jwks_url,omitempty"`
	JWKSFile string `yaml:"jwks_file" json:"jwks_file,omitempty"`
	// JWKSRefreshMs is how often the key set is fetched. Default 300000.
	JWKSRefreshMs int `yaml:"jwks_refresh_ms" json:"jwks_refresh_ms"`
	// JWKSMaxStaleMs is how long the last good key set is used while the
	// issuer cannot be reached; after that every token fails. Default 3600000.
	JWKSMaxStaleMs int `yaml:"jwks_max_stale_ms" json:"jwks_max_stale_ms"`
	// UnknownKidRefetchMs is the least time between two fetches caused by a
	// token whose kid is not in the set. Default 30000.
	UnknownKidRefetchMs int `yaml:"unknown_kid_refetch_ms" json:"unknown_kid_refetch_ms"`
	// LeewayMs tolerates clock skew on exp and nbf. Default 30000, at most 300000.
	LeewayMs int `yaml:"leeway_ms" json:"leeway_ms"`
	// Header carrying "Bearer <token>". Default Authorization.
	Header string `yaml:"header" json:"header"`
	// TenantClaim and ScopesClaim map claims to the identity; scopes may be
	// a space-separated string or an array. Defaults "tenant" and "scope".
	TenantClaim string `yaml:"tenant_claim" json:"tenant_claim"`
	ScopesClaim string `yaml:"scopes_claim" json:"scopes_claim"`
	// AllowedTypes are the values of the token header's "typ" that are
	// accepted (RFC 8725 §3.11: a token of another kind, say a logout or
	// ID token of the same issuer, is not an access token). Compared
	// case-insensitively, with an "application/" prefix ignored (RFC 7515
	// §4.1.9). Empty means [JWT, at+jwt]. A token without typ is accepted
	// unless RequireType is set (RFC 9068 resource servers set it and
	// allow only at+jwt).
	AllowedTypes []string `yaml:"allowed_types" json:"allowed_types,omitempty"`
	RequireType  bool     `yaml:"require_type" json:"require_type,omitempty"`
}

// APIKeyPolicy accepts keys presented in a header; the snapshot holds only
// their SHA-256 hashes.
type APIKeyPolicy struct {
	Header string   `yaml:"header" json:"header"` // default X-Api-Key
	Keys   []APIKey `yaml:"keys" json:"keys"`
}

// APIKey is one accepted key, by hash.
type APIKey struct {
	ID     string   `yaml:"id" json:"id"`
	SHA256 string   `yaml:"sha256" json:"sha256"` // hex of SHA-256 of the key
	Tenant string   `yaml:"tenant" json:"tenant"`
	Scopes []string `yaml:"scopes" json:"scopes,omitempty"`
}

// IdentityHeaders name the request headers that carry the verified
// identity upstream; copies sent by a client are always removed.
type IdentityHeaders struct {
	Tenant  string `yaml:"tenant" json:"tenant"`   // default X-Rampart-Tenant
	Subject string `yaml:"subject" json:"subject"` // default X-Rampart-Subject
	KeyID   string `yaml:"key_id" json:"key_id"`   // default X-Rampart-Key-Id
	Scopes  string `yaml:"scopes" json:"scopes"`   // default X-Rampart-Scopes
}

// QuotaPolicy is a token bucket per key.
type QuotaPolicy struct {
	ID string `yaml:"id" json:"id"`
	// Key parts, joined: tenant, api_key, client_ip, claim:<name>,
	// header:<Name>, param:<name> (a path template parameter).
	Key []string `yaml:"key" json:"key"`
	// RatePerSecond and Burst of each key's bucket in this region. With
	// Regional set, the rate is the global rate times this region's share;
	// with Global set, both come from the region's lease (leave them out).
	RatePerSecond float64   `yaml:"rate_per_second" json:"rate_per_second"`
	Burst         int       `yaml:"burst" json:"burst"`
	Regional      *Regional `yaml:"regional" json:"regional,omitempty"`
	Global        *Global   `yaml:"global" json:"global,omitempty"`
	// Store: local (each proxy alone, the default) or redis (shared by the
	// proxies of a region).
	Store string      `yaml:"store" json:"store"`
	Redis *RedisStore `yaml:"redis" json:"redis,omitempty"`
}

// Regional splits a global budget into regional shares.
type Regional struct {
	GlobalRatePerSecond float64            `yaml:"global_rate_per_second" json:"global_rate_per_second"`
	Shares              map[string]float64 `yaml:"shares" json:"shares"` // region -> share, summing to at most 1
}

// Global is a global budget the control plane splits into regional leases
// by the demand each region reports (README: global quota leases).
type Global struct {
	RatePerSecond uint64 `yaml:"rate_per_second" json:"rate_per_second"` // the whole fleet's rate, 1..1e9
	Burst         uint64 `yaml:"burst" json:"burst"`                     // the whole fleet's burst, 1..1e9
	// FloorSharePercent of the global rate is each region's least lease,
	// and what a region enforces when its lease expired unrenewed; 0..100,
	// and at most 100 in total over the config's regions.
	FloorSharePercent int `yaml:"floor_share_percent" json:"floor_share_percent"`
	LeaseTTLMs        int `yaml:"lease_ttl_ms" json:"lease_ttl_ms"` // default 10000, 1000..300000
	RebalanceMs       int `yaml:"rebalance_ms" json:"rebalance_ms"` // default 2000, 100..lease_ttl_ms/2
}

// RedisStore is a shared regional quota store.
type RedisStore struct {
	Address   string `yaml:"address" json:"address"`
	TimeoutMs int    `yaml:"timeout_ms" json:"timeout_ms"` // default 50
	// FailMode when Redis cannot be reached in time: open (admit, and fall
	// back to the local bucket) or closed (429). Required.
	FailMode string `yaml:"fail_mode" json:"fail_mode"`
	Prefix   string `yaml:"prefix" json:"prefix"` // key prefix, default "rampart:quota:"
}

// HeaderRules change a route's request and response headers, after auth
// and before forwarding.
type HeaderRules struct {
	Request  HeaderOps `yaml:"request" json:"request"`
	Response HeaderOps `yaml:"response" json:"response"`
}

// HeaderOps are applied remove, then set, then add.
type HeaderOps struct {
	Add    map[string]string `yaml:"add" json:"add,omitempty"`
	Set    map[string]string `yaml:"set" json:"set,omitempty"`
	Remove []string          `yaml:"remove" json:"remove,omitempty"`
}
