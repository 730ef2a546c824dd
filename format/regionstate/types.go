package regionstate

import (
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Format is the envelope format name of a region-state document.
const Format = "rampart.regionstate.v1"

// State is one verified region-state document (immutable once parsed).
type State struct {
	Version   envelope.Version // (epoch, sequence) of this document
	Created   time.Time        // when the producer signed it
	Regions   []Region         // sorted by Name, unique
	Platforms []Platform       // sorted by Name, unique

	Sites       []Site       // sorted by Name, unique: every agent site the control plane knows
	QuotaLeases []QuotaLease // sorted by (Policy, Region), unique
}

// Region is the state of one region.
type Region struct {
	Name          string
	Healthy       bool
	ConfigVersion envelope.Version // the snapshot version the region serves
	Draining      bool             // operator drain (next issue); false = not draining
}

// Platform is the state of one backend platform: a cluster set that shares
// one database.
type Platform struct {
	Name        string
	Writer      string    // current writer region ("" = none known)
	WriterEpoch uint64    // fencing epoch of the writer switch
	Replicas    []Replica // sorted by Region, unique
}

// Replica is one region's replica of a platform's database.
type Replica struct {
	Region     string
	LagMs      uint64
	ObservedAt time.Time
}

// Site is one anycast site (an agent) and the VIP prefixes it announces
// now, as its node last reported them to the control plane.
type Site struct {
	Name       string    // the site / node id
	Region     string    // the region the node reported in its identity
	Announcing []string  // VIP prefixes (netip.Prefix text, masked), sorted, unique
	ReportedAt time.Time // when that report arrived at the control plane
}

// QuotaLease is a region's share of a global quota policy's rate, valid
// until Expires.
type QuotaLease struct {
	Policy    string
	Region    string
	PerSecond uint64 // the region's rate (requests per second)
	Burst     uint64
	// Nodes is how many ready nodes the region had when the lease was
	// granted: proxies with local buckets each enforce PerSecond/Nodes
	// (0 counts as 1).
	Nodes   uint64
	Expires time.Time
}
