package model

import (
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// ClusterHealth is what a node says about one upstream cluster: how many
// of its endpoints pass their active health check (clusters with health
// checks only).
type ClusterHealth struct {
	Name    string `json:"name"`
	Healthy int    `json:"healthy"`
	Total   int    `json:"total"`
}

// RegionDrain is an operator's drain of a whole region: while it is
// listed, the region-state document marks the region draining.
type RegionDrain struct {
	Region string    `json:"region"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"` // the token that drained it
	Since  time.Time `json:"since"`
}

// PlatformWriter is a platform's current writer region, set by an explicit
// primary switch; Epoch is the fencing epoch of that switch (1 for the
// first) and only grows.
type PlatformWriter struct {
	Platform   string    `json:"platform"`
	Region     string    `json:"region"`
	Epoch      uint64    `json:"epoch"`
	By         string    `json:"by,omitempty"`
	SwitchedAt time.Time `json:"switched_at"`
}

// RegionControl is the stored operator state of regions and platforms:
// drains and writers (sorted by region and platform).
type RegionControl struct {
	Drains    []RegionDrain    `json:"drains"`
	Writers   []PlatformWriter `json:"writers"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// Event kinds of region control changes.
const (
	EventRegionDrain = "region.drain"    // subject: the region
	EventWriter      = "platform.writer" // subject: platform=region@epoch
)

// RegionHealth is one region's health as the control plane judges it from
// its nodes' reports (GET /v1/regions).
type RegionHealth struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	// Why says which part of the rule decided, in words.
	Why      string `json:"why"`
	Nodes    int    `json:"nodes"`    // every node that reported this region
	Fresh    int    `json:"fresh"`    // of those, with a report within report_max_age
	Ready    int    `json:"ready"`    // of the fresh ones, ready
	Draining bool   `json:"draining"` // an operator drain is in force
	// DrainReason is the drain's reason, when draining.
	DrainReason string `json:"drain_reason,omitempty"`
	// ConfigVersion is the lowest snapshot version a ready node serves
	// (0.0 with no ready node); Versions counts ready nodes per version.
	ConfigVersion snapshot.Version `json:"config_version"`
	Versions      map[string]int   `json:"versions,omitempty"`
	// Clusters counts, per critical cluster, the ready nodes reporting a
	// healthy endpoint of it.
	Clusters map[string]int `json:"clusters,omitempty"`
}

// ReplicaLag is the latest lag a monitor pushed for one platform's replica
// in one region.
type ReplicaLag struct {
	Region     string    `json:"region"`
	LagMs      uint64    `json:"lag_ms"`
	ObservedAt time.Time `json:"observed_at"`
	PushedAt   time.Time `json:"pushed_at,omitzero"`
}

// PlatformState is a platform as GET /v1/platforms shows it.
type PlatformState struct {
	Name        string       `json:"name"`
	Writer      string       `json:"writer,omitempty"`
	WriterEpoch uint64       `json:"writer_epoch"`
	SwitchedAt  time.Time    `json:"switched_at,omitzero"`
	Replicas    []string     `json:"replica_regions,omitempty"` // from the config
	Lags        []ReplicaLag `json:"lags,omitempty"`
}
