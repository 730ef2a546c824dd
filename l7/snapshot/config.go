// Package snapshot is rampart's configuration format: the declarative model,
// its validation, compilation into canonical bytes, and Ed25519 signing and
// verification of snapshot files. The proxy, the agent and the control plane
// all import it; it imports no other part of rampart.
package snapshot

import "fmt"

// Config is the declarative configuration a snapshot is compiled from.
type Config struct {
	Version   Version   `yaml:"version" json:"version"`
	Routing   Routing   `yaml:"routing" json:"routing"`
	Limits    Limits    `yaml:"limits" json:"limits"`
	Telemetry Telemetry `yaml:"telemetry" json:"telemetry"`

	// TLSSessionTickets is the ticket key rotation (tickets.go); absent: the default.
	TLSSessionTickets *TicketPolicy `yaml:"tls_session_tickets" json:"tls_session_tickets,omitempty"`

	AuthPolicies    []AuthPolicy    `yaml:"auth_policies" json:"auth_policies,omitempty"`
	QuotaPolicies   []QuotaPolicy   `yaml:"quota_policies" json:"quota_policies,omitempty"`
	IdentityHeaders IdentityHeaders `yaml:"identity_headers" json:"identity_headers"`
	L4              L4              `yaml:"l4" json:"l4"`
	Listeners       []Listener      `yaml:"listeners" json:"listeners"`
	Clusters        []Cluster       `yaml:"clusters" json:"clusters"`
	Routes          []Route         `yaml:"routes" json:"routes"`

	// The regional policy (regions.go); all absent means none.
	Regions   []RegionDef     `yaml:"regions" json:"regions,omitempty"`
	Platforms []Platform      `yaml:"platforms" json:"platforms,omitempty"`
	Tenants   []Tenant        `yaml:"tenants" json:"tenants,omitempty"`
	Regional  *RegionalPolicy `yaml:"regional" json:"regional,omitempty"`
}

// Version orders snapshots: epoch first, then sequence. A control-plane
// takeover increments the epoch; every compiled revision the sequence.
type Version struct {
	Epoch    uint64 `yaml:"epoch" json:"epoch"`
	Sequence uint64 `yaml:"sequence" json:"sequence"`
}

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	if v.Epoch != o.Epoch {
		return v.Epoch < o.Epoch
	}
	return v.Sequence < o.Sequence
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Epoch, v.Sequence) }

// Routing holds settings that apply to every route.
type Routing struct {
	// EncodedSlashes is what happens to a request path with %2F or %5C:
	// "reject" (400, the default) or "decode" (treated as / and \ before
	// matching and forwarded decoded).
	EncodedSlashes string `yaml:"encoded_slashes" json:"encoded_slashes"`
	// MaxRouteTimeoutMs bounds every route's timeout_ms. Default 60000.
	MaxRouteTimeoutMs int `yaml:"max_route_timeout_ms" json:"max_route_timeout_ms"`
}

// Listener is one address the proxy accepts connections on.
type Listener struct {
	Name      string   `yaml:"name" json:"name"`
	Address   string   `yaml:"address" json:"address"`
	Protocols []string `yaml:"protocols" json:"protocols"` // http1, h2, h3
	TLS       *TLS     `yaml:"tls" json:"tls,omitempty"`

	MaxHeaderBytes         int   `yaml:"max_header_bytes" json:"max_header_bytes"`
	MaxBodyBytes           int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	ReadHeaderTimeoutMs    int   `yaml:"read_header_timeout_ms" json:"read_header_timeout_ms"`
	IdleTimeoutMs          int   `yaml:"idle_timeout_ms" json:"idle_timeout_ms"`
	MaxConnections         int   `yaml:"max_connections" json:"max_connections"`
	H2MaxConcurrentStreams int   `yaml:"h2_max_concurrent_streams" json:"h2_max_concurrent_streams"`
	H2MaxResetsPerSecond   int   `yaml:"h2_max_resets_per_second" json:"h2_max_resets_per_second"`
	// H2Server picks the HTTP/2 server: "std" (x/net/http2's) or
	// "rampart" (l7/h2). Empty: the build's default (rampart).
	H2Server string `yaml:"h2_server" json:"h2_server,omitempty"`
	// RequestBodyTimeoutMs bounds the wait for the next bytes of a request
	// body (idle time between two reads, like nginx's client_body_timeout);
	// a body that stalls longer ends as 408 (or a stream reset on h2/h3).
	RequestBodyTimeoutMs int `yaml:"request_body_timeout_ms" json:"request_body_timeout_ms"`
	// TunnelIdleTimeoutMs closes a WebSocket tunnel when no byte went
	// either way for this long.
	TunnelIdleTimeoutMs int `yaml:"tunnel_idle_timeout_ms" json:"tunnel_idle_timeout_ms"`
}

// TLS configures termination on a listener.
type TLS struct {
	MinVersion   string        `yaml:"min_version" json:"min_version"` // "1.2" (default) or "1.3"
	Certificates []Certificate `yaml:"certificates" json:"certificates"`
}

// Certificate is a PEM certificate chain and key on the node's disk, served
// for the SNI names listed (or, when none are listed, for the names in the
// certificate). The first certificate is the default for unknown SNI.
type Certificate struct {
	CertFile    string   `yaml:"cert_file" json:"cert_file"`
	KeyFile     string   `yaml:"key_file" json:"key_file"`
	ServerNames []string `yaml:"server_names" json:"server_names,omitempty"`
}

// Cluster is a set of upstream endpoints that serve one revision of a service.
type Cluster struct {
	Name               string     `yaml:"name" json:"name"`
	Endpoints          []Endpoint `yaml:"endpoints" json:"endpoints"`
	ConnectTimeoutMs   int        `yaml:"connect_timeout_ms" json:"connect_timeout_ms"`
	MaxIdlePerEndpoint int        `yaml:"max_idle_per_endpoint" json:"max_idle_per_endpoint"`
	// Protocol to the endpoints: http1 (default) or h2c (HTTP/2 without
	// TLS, prior knowledge; needed for gRPC).
	Protocol       string       `yaml:"protocol" json:"protocol"`
	HealthCheck    *HealthCheck `yaml:"health_check" json:"health_check,omitempty"`
	Outlier        Outlier      `yaml:"outlier_detection" json:"outlier_detection"`
	CircuitBreaker Breaker      `yaml:"circuit_breaker" json:"circuit_breaker"`
	RetryBudget    *RetryBudget `yaml:"retry_budget" json:"retry_budget,omitempty"` // absent: 20 % with a floor of 3
	// PanicMode is what happens when no endpoint is healthy: fail_closed
	// (503, the default) or all_endpoints (use every endpoint anyway).
	PanicMode string `yaml:"panic_mode" json:"panic_mode"`
}

// Endpoint is one upstream server.
type Endpoint struct {
	Address string `yaml:"address" json:"address"`
	Weight  int    `yaml:"weight" json:"weight"`
	Region  string `yaml:"region" json:"region,omitempty"`
	Zone    string `yaml:"zone" json:"zone,omitempty"`
}

// Route sends matching requests to an upstream cluster.
type Route struct {
	ID              string       `yaml:"id" json:"id"`
	Host            string       `yaml:"host" json:"host"`
	Methods         []string     `yaml:"methods" json:"methods"`
	PathTemplate    string       `yaml:"path_template" json:"path_template"`
	UpstreamCluster string       `yaml:"upstream_cluster" json:"upstream_cluster"`
	AuthPolicyID    string       `yaml:"auth_policy_id" json:"auth_policy_id"`
	QuotaPolicyID   string       `yaml:"quota_policy_id" json:"quota_policy_id"`
	TimeoutMs       int          `yaml:"timeout_ms" json:"timeout_ms"`
	RetryPolicy     *RetryPolicy `yaml:"retry_policy" json:"retry_policy,omitempty"`
	TrafficSplit    []Split      `yaml:"traffic_split" json:"traffic_split,omitempty"`
	RequestClass    string       `yaml:"request_class" json:"request_class"` // read | write
	Idempotency     string       `yaml:"idempotency" json:"idempotency"`     // safe | key:<Header> | none
	// MaxConcurrentRequests bounds this route's requests in flight; 0 means
	// only the global limit applies.
	MaxConcurrentRequests int `yaml:"max_concurrent_requests" json:"max_concurrent_requests"`
	// RequiredScopes must all be granted to the caller (403 otherwise).
	RequiredScopes []string     `yaml:"required_scopes" json:"required_scopes,omitempty"`
	Headers        *HeaderRules `yaml:"headers" json:"headers,omitempty"`
	// Platform puts the route under the regional policy: requests go only
	// to regions the verified tenant may use and the platform's signals
	// allow. Without a platform the route is served as before.
	Platform string `yaml:"platform" json:"platform,omitempty"`
	// MaxReplicaLagMs: a read is served only by a region whose replica lag
	// is at most this (default 1000). MaxSignalAgeMs: the lag observation
	// must be younger than this (default 10000).
	MaxReplicaLagMs int `yaml:"max_replica_lag_ms" json:"max_replica_lag_ms,omitempty"`
	MaxSignalAgeMs  int `yaml:"max_signal_age_ms" json:"max_signal_age_ms,omitempty"`
	// Match and BodyRoute: match.go and bodyroute.go.
	Match     *RouteMatch `yaml:"match" json:"match,omitempty"`
	BodyRoute *BodyRoute  `yaml:"body_route" json:"body_route,omitempty"`
	// Cache: cache.go.
	Cache *RouteCache `yaml:"cache" json:"cache,omitempty"`
}

// RetryPolicy bounds how a route's requests are retried.
type RetryPolicy struct {
	MaxAttempts       int   `yaml:"max_attempts" json:"max_attempts"`
	RetryableStatuses []int `yaml:"retryable_statuses" json:"retryable_statuses"`
}

// Split sends a share of a route's traffic to a revision (a cluster name).
type Split struct {
	Revision string `yaml:"revision" json:"revision"`
	Weight   int    `yaml:"weight" json:"weight"`
}

// Defaults and hard bounds. Values outside the bounds fail validation.
const (
	DefaultMaxRouteTimeoutMs = 60_000
	HardMaxRouteTimeoutMs    = 3_600_000
	MaxRetryAttempts         = 5

	DefaultMaxHeaderBytes       = 64 << 10
	DefaultMaxBodyBytes         = 10 << 20
	DefaultReadHeaderTimeoutMs  = 10_000
	DefaultIdleTimeoutMs        = 120_000
	DefaultMaxConnections       = 10_000
	DefaultH2MaxStreams         = 250
	DefaultH2MaxResetsPerSec    = 200
	DefaultRequestBodyTimeoutMs = 30_000
	DefaultTunnelIdleTimeoutMs  = 300_000
	DefaultConnectTimeoutMs     = 2_000
	DefaultMaxIdlePerEndpoint   = 1024
)

// IdempotencyKeyHeader returns the header named by "key:<Header>" and true,
// or "" and false for other policies.
func (r Route) IdempotencyKeyHeader() (string, bool) {
	const p = "key:"
	if len(r.Idempotency) > len(p) && r.Idempotency[:len(p)] == p {
		return r.Idempotency[len(p):], true
	}
	return "", false
}
