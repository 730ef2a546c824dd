// Package model holds the control plane's data: revisions, rollouts, the
// fleet and its nodes, the deny channel's state and events. The same types
// are the JSON of the HTTP API and the documents the stores keep; the node
// side (control/nodeclient) shares the node identity and status report.
// It holds no logic beyond naming and parsing.
package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Revision kinds.
const (
	KindSubmitted = "submitted" // a config submitted through the API
	KindRollback  = "rollback"  // an earlier revision's config published again under a new version
	KindRepublish = "republish" // a queued revision published again because a newer version went out first
)

// Revision is a desired config, compiled and signed into a snapshot file
// (kept by the store apart from this record).
type Revision struct {
	ID             string           `json:"id"`
	Version        snapshot.Version `json:"version"`
	Kind           string           `json:"kind"`
	Source         string           `json:"source,omitempty"` // rollback/republish: whose config this is
	Message        string           `json:"message,omitempty"`
	IdempotencyKey string           `json:"idempotency_key,omitempty"`
	BodySHA256     string           `json:"body_sha256,omitempty"` // of the submitted body
	SHA256         string           `json:"sha256"`                // the snapshot's: of the canonical config, version included
	// ConfigSHA256 is of the canonical config with the version left out:
	// equal for revisions of the same config (a rollback and its source).
	ConfigSHA256  string    `json:"config_sha256"`
	Routes        int       `json:"routes"`
	Clusters      int       `json:"clusters"`
	SnapshotBytes int       `json:"snapshot_bytes"`
	CompileMs     float64   `json:"compile_ms"`
	CreatedAt     time.Time `json:"created_at"`
}

// RevisionID names the revision with a sequence number: "r42". Sequences
// are unique across epochs, so IDs are too.
func RevisionID(seq uint64) string { return "r" + strconv.FormatUint(seq, 10) }

// ParseRevisionID is the inverse of RevisionID.
func ParseRevisionID(id string) (uint64, error) {
	if len(id) < 2 || id[0] != 'r' || id[1] == '0' || id[1] == '+' {
		return 0, fmt.Errorf("revision id %q is not r<sequence>", id)
	}
	n, err := strconv.ParseUint(id[1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("revision id %q is not r<sequence>", id)
	}
	return n, nil
}

// ParseVersion reads "epoch.sequence" as Version.String writes it.
func ParseVersion(s string) (snapshot.Version, error) {
	var v snapshot.Version
	e, q, ok := strings.Cut(s, ".")
	if !ok {
		return v, fmt.Errorf("version %q is not epoch.sequence", s)
	}
	var err1, err2 error
	v.Epoch, err1 = strconv.ParseUint(e, 10, 64)
	v.Sequence, err2 = strconv.ParseUint(q, 10, 64)
	if err1 != nil || err2 != nil || e == "" || q == "" || (len(e) > 1 && e[0] == '0') || (len(q) > 1 && q[0] == '0') {
		return snapshot.Version{}, fmt.Errorf("version %q is not epoch.sequence", s)
	}
	return v, nil
}

// Fleet is what every node runs when no rollout stage says otherwise.
type Fleet struct {
	Stable        string           `json:"stable,omitempty"` // revision id; "" before the first rollout opened
	StableVersion snapshot.Version `json:"stable_version"`
	// MaxPublished is the newest version ever handed to any node: a
	// revision is only rolled out with a version above it.
	MaxPublished snapshot.Version `json:"max_published"`
	UpdatedAt    time.Time        `json:"updated_at"`
}

// Node is the control plane's record of a node: its last status report.
type Node struct {
	Status
	SeenAt   time.Time `json:"seen_at"`
	Instance string    `json:"instance,omitempty"` // control instance that took the report
}

// Status is a node's report: identity, the versions it has, and the health
// of its proxy since the active version went active.
type Status struct {
	Identity
	Desired    snapshot.Version `json:"desired"`    // last version the control plane offered
	Downloaded snapshot.Version `json:"downloaded"` // newest verified and handed to the proxy
	Active     snapshot.Version `json:"active"`     // what the proxy serves
	Ready      bool             `json:"ready"`
	// Requests and Errors (gateway and upstream faults) count since Active
	// went active; ErrorRate is Errors/Requests.
	Requests  uint64  `json:"requests"`
	Errors    uint64  `json:"errors"`
	ErrorRate float64 `json:"error_rate"`
	LatencyMs float64 `json:"latency_ms"` // mean since Active went active
	// DenySequence is the deny list the node handed over last.
	DenySequence uint64 `json:"deny_sequence"`
	// Refused counts snapshots and deny lists the node refused (bad
	// signature, older version or epoch); LastError says the latest why.
	Refused   uint64 `json:"refused"`
	LastError string `json:"last_error,omitempty"`
	// RefusedVersion is the last snapshot version the node (its client or
	// its proxy) refused to run, and RefusedReason why (a certificate
	// file missing on the node, a bad signature, ...): a stage fails on
	// the first refusal of its version.
	RefusedVersion snapshot.Version `json:"refused_version,omitzero"`
	RefusedReason  string           `json:"refused_reason,omitempty"`
	// QuotaDemand is, per quota policy, the rate of requests the proxy
	// tried to admit (allowed and limited) over the last report interval,
	// sorted by policy: global quota leases are split by it.
	QuotaDemand []QuotaDemand `json:"quota_demand,omitempty"`
	// Clusters is the health of the proxy's upstream clusters that have
	// active health checks, sorted by name.
	Clusters []ClusterHealth `json:"clusters,omitempty"`
	// Announcing lists the VIP prefixes the node's anycast agent announces
	// now (masked prefix text, sorted); AgentSeen says the agent was
	// asked (an agent that announces nothing reports an empty list).
	Announcing []string `json:"announcing,omitempty"`
	AgentSeen  bool     `json:"agent_seen,omitempty"`
	// VIPs is the agent's state of every VIP it has configured (sorted by
	// prefix), with the reason and the guard's view: what the operator page
	// shows per site. Guard is the agent's min-sites guard; nil when no
	// agent answered.
	VIPs  []VIPReport   `json:"vips,omitempty"`
	Guard *AnycastGuard `json:"guard,omitempty"`
	// RegionState is the version of the region-state document the node
	// handed over last ("epoch.sequence"; "" before any).
	RegionState string `json:"region_state,omitempty"`
	// Purge is the version of the cache purge document the node handed
	// over last ("epoch.sequence"; "" before any).
	Purge string `json:"purge,omitempty"`
}

// The states of an anycast VIP (the agent's anycast.VIPState values), and
// VIPUnknown for a state this control plane does not know (a newer agent).
const (
	VIPAnnounced = "announced" // announced with its configured attributes
	VIPDraining  = "draining"  // still announced, made unattractive, until the drain ends
	VIPHeld      = "held"      // drained but kept announced by the min-sites guard
	VIPWithdrawn = "withdrawn" // not announced
	VIPUnknown   = "unknown"
)

// KnownVIPState says whether s is one of the VIP states above.
func KnownVIPState(s string) bool {
	switch s {
	case VIPAnnounced, VIPDraining, VIPHeld, VIPWithdrawn, VIPUnknown:
		return true
	}
	return false
}

// VIPReport is one VIP as a node's anycast agent reports it.
type VIPReport struct {
	Prefix string    `json:"prefix"` // masked
	State  string    `json:"state"`  // VIPAnnounced, VIPDraining, VIPHeld, VIPWithdrawn or VIPUnknown
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Drained says who drains the VIP deliberately and why ("": nobody).
	Drained string `json:"drained,omitempty"`
	// GuardHolding: the min-sites guard keeps the VIP announced (state
	// held); GuardVerdict is its latest verdict and OtherSites how many
	// other sites it sees announcing the VIP.
	GuardHolding bool   `json:"guard_holding,omitempty"`
	GuardVerdict string `json:"guard_verdict,omitempty"`
	OtherSites   int    `json:"other_sites"`
}

// AnycastGuard is the state of an agent's min-sites guard.
type AnycastGuard struct {
	MinSites int    `json:"min_sites"`        // a VIP is withdrawn only while this many other sites announce it
	Source   string `json:"source,omitempty"` // where the guard counts other sites from
	Holding  int    `json:"holding"`          // VIPs the guard holds announced now
}

// QuotaDemand is one quota policy's demand on a node.
type QuotaDemand struct {
	Policy    string  `json:"policy"`
	PerSecond float64 `json:"per_second"`
}

// DenyEntry is one entry of the fast deny channel.
type DenyEntry struct {
	Kind      string    `json:"kind"`
	Value     string    `json:"value"` // canonical (CIDRs masked)
	ExpiresAt time.Time `json:"expires_at"`
	Reason    string    `json:"reason,omitempty"`
	AddedAt   time.Time `json:"added_at"`
}

// DenyState is the deny channel: its entries and the signed file built
// from them (sequence Sequence).
type DenyState struct {
	Sequence  uint64      `json:"sequence"`
	Entries   []DenyEntry `json:"entries"`
	UpdatedAt time.Time   `json:"updated_at"`
	File      []byte      `json:"-"`
}

// Event kinds written to the outbox with the change they describe.
const (
	EventRevision = "revision.created"
	EventRollout  = "rollout.changed"
	EventFleet    = "fleet.changed"
	EventDeny     = "deny.changed"
)

// Event says that something changed; listeners re-read what they need.
type Event struct {
	ID      int64     `json:"id"`
	Epoch   uint64    `json:"epoch"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject,omitempty"`
	At      time.Time `json:"at"`
}
