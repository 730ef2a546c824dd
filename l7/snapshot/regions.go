package snapshot

import (
	"slices"
	"strings"
)

// RegionDef is one region of the regional policy. Endpoints name their
// region and zone; when regions are declared those names must be listed here.
type RegionDef struct {
	Name  string   `yaml:"name" json:"name"`
	Zones []string `yaml:"zones" json:"zones,omitempty"`
}

// Platform is a backend platform: a set of clusters that share one database,
// the regions that hold a replica of it, and the three guarantees that must
// all hold before a write may be served outside a tenant's primary region.
type Platform struct {
	Name                  string   `yaml:"name" json:"name"`
	Clusters              []string `yaml:"clusters" json:"clusters"`
	ReplicaRegions        []string `yaml:"replica_regions" json:"replica_regions"`
	GlobalIdempotencyKeys bool     `yaml:"global_idempotency_keys" json:"global_idempotency_keys,omitempty"`
	UniqueConstraints     bool     `yaml:"unique_constraints" json:"unique_constraints,omitempty"`
	ExplicitPrimarySwitch bool     `yaml:"explicit_primary_switch" json:"explicit_primary_switch,omitempty"`
}

// CrossRegionWrites reports whether the platform provides all three
// guarantees a cross-region write needs.
func (p Platform) CrossRegionWrites() bool {
	return p.GlobalIdempotencyKeys && p.UniqueConstraints && p.ExplicitPrimarySwitch
}

// Failover modes of a tenant.
const (
	FailoverFixed         = "fixed"          // the primary region only, never move
	FailoverPrimaryBackup = "primary_backup" // the primary, else the configured backup
	FailoverWeighted      = "weighted"       // reads spread by weight over the allowed regions
)

// Tenant says where one tenant's requests may be served. The tenant is the
// one of the verified identity (l7/auth), never a client header.
type Tenant struct {
	ID             string   `yaml:"id" json:"id"`
	PrimaryRegion  string   `yaml:"primary_region" json:"primary_region"`
	AllowedRegions []string `yaml:"allowed_regions" json:"allowed_regions"` // default [primary_region]
	FailoverMode   string   `yaml:"failover_mode" json:"failover_mode"`     // default fixed
	BackupRegion   string   `yaml:"backup_region" json:"backup_region,omitempty"`
	// Weights spread a weighted tenant's reads (region -> 1..10000, every
	// allowed region listed). Without weights a weighted tenant's reads
	// prefer the proxy's own region, else spread evenly.
	Weights map[string]int `yaml:"weights" json:"weights,omitempty"`
	// WeightedOptIn must be true for failover_mode weighted: spreading a
	// tenant's reads over regions is off unless the tenant opts in.
	WeightedOptIn bool `yaml:"weighted_opt_in" json:"weighted_opt_in,omitempty"`
}

// RegionalPolicy holds the settings of the regional decision that apply to
// every route with a platform.
type RegionalPolicy struct {
	// HintHeader carries a client's region hint. It is not authenticated:
	// it may only narrow the candidate regions. Default X-Rampart-Region-Hint.
	HintHeader string `yaml:"hint_header" json:"hint_header"`
	// MaxConfigLag is how many sequences of the same epoch a region's served
	// snapshot may be behind this one (an older epoch is always too old).
	// Default 2, at most 1000000.
	MaxConfigLag *uint64 `yaml:"max_config_lag" json:"max_config_lag"`
	// RecoverySteps are the shares (percent, increasing, ending at 100) a
	// region that returns to service gets, one step per RecoveryStepMs.
	// Default [10, 25, 50, 100].
	RecoverySteps  []int `yaml:"recovery_steps" json:"recovery_steps"`
	RecoveryStepMs int   `yaml:"recovery_step_ms" json:"recovery_step_ms"` // default 30000
	// RegionStateMaxAgeMs: a region-state document older than this (by its
	// creation time) counts as absent: every signal unknown. Default 30000.
	RegionStateMaxAgeMs int `yaml:"region_state_max_age_ms" json:"region_state_max_age_ms"`
}

// Defaults and bounds of the regional policy.
const (
	DefaultHintHeader          = "X-Rampart-Region-Hint"
	DefaultMaxConfigLag        = 2
	MaxConfigLagBound          = 1_000_000
	DefaultRecoveryStepMs      = 30_000
	DefaultRegionStateMaxAgeMs = 30_000
	DefaultMaxReplicaLagMs     = 1_000
	DefaultMaxSignalAgeMs      = 10_000
	// MaxRegions bounds the regions list: the decision keeps region sets
	// as 64-bit masks.
	MaxRegions       = 64
	MaxRecoverySteps = 16
)

// DefaultRecoverySteps are the shares of a returning region by default.
var DefaultRecoverySteps = []int{10, 25, 50, 100}

// HasRegional reports whether the config uses the regional policy at all.
// A config without it is served exactly as before the policy existed.
func (c *Config) HasRegional() bool {
	return len(c.Regions) > 0 || len(c.Platforms) > 0 || len(c.Tenants) > 0 || c.Regional != nil
}

// normalizeRegional fills the regional defaults (only when the config uses
// the regional policy, so other configs keep their canonical bytes) and
// sorts regions, platforms and tenants so the source order does not matter.
func normalizeRegional(c *Config) {
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Platform != "" {
			setDefault(&r.MaxReplicaLagMs, DefaultMaxReplicaLagMs)
			setDefault(&r.MaxSignalAgeMs, DefaultMaxSignalAgeMs)
		}
	}
	if !c.HasRegional() {
		return
	}
	if c.Regional == nil {
		c.Regional = &RegionalPolicy{}
	}
	rp := c.Regional
	setDefaultString(&rp.HintHeader, DefaultHintHeader)
	if rp.MaxConfigLag == nil {
		v := uint64(DefaultMaxConfigLag)
		rp.MaxConfigLag = &v
	}
	if len(rp.RecoverySteps) == 0 {
		rp.RecoverySteps = slices.Clone(DefaultRecoverySteps)
	}
	setDefault(&rp.RecoveryStepMs, DefaultRecoveryStepMs)
	setDefault(&rp.RegionStateMaxAgeMs, DefaultRegionStateMaxAgeMs)
	for i := range c.Regions {
		slices.Sort(c.Regions[i].Zones)
	}
	for i := range c.Platforms {
		slices.Sort(c.Platforms[i].Clusters)
		slices.Sort(c.Platforms[i].ReplicaRegions)
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		setDefaultString(&t.FailoverMode, FailoverFixed)
		if len(t.AllowedRegions) == 0 && t.PrimaryRegion != "" {
			t.AllowedRegions = []string{t.PrimaryRegion}
		}
		slices.Sort(t.AllowedRegions)
	}
	slices.SortStableFunc(c.Regions, func(a, b RegionDef) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(c.Platforms, func(a, b Platform) int { return strings.Compare(a.Name, b.Name) })
	slices.SortStableFunc(c.Tenants, func(a, b Tenant) int { return strings.Compare(a.ID, b.ID) })
}
