package model

import (
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Rollout states. pending → staging → done, or failed/aborted; a pending
// rollout that a newer one or a rollback overtook is superseded.
const (
	StatePending    = "pending"
	StateStaging    = "staging"
	StateDone       = "done"
	StateFailed     = "failed"
	StateAborted    = "aborted"
	StateSuperseded = "superseded"
)

// Phases of an open stage.
const (
	PhaseWaiting = "waiting" // for the stage's nodes to report the version active
	PhaseBaking  = "baking"  // health compared with the rest of the fleet
)

// Rollout is the staged rollout of one revision (same id).
type Rollout struct {
	Revision string           `json:"revision"`
	Version  snapshot.Version `json:"version"`
	State    string           `json:"state"`
	// Baseline is the stable revision when the rollout started: what the
	// rest of the fleet runs, and what a failure returns to.
	Baseline    string  `json:"baseline,omitempty"`
	BaselineErr float64 `json:"baseline_error_rate"` // fleet error rate at the start
	BaselineLat float64 `json:"baseline_latency_ms"`
	Paused      bool    `json:"paused"`
	PauseReason string  `json:"pause_reason,omitempty"`
	// Stage indexes the open stage (-1 before the first); the revision
	// is desired by the nodes of every stage up to and including it.
	Stage      int           `json:"stage"`
	Phase      string        `json:"phase,omitempty"`
	PhaseSince time.Time     `json:"phase_since"`
	Stages     []StageRecord `json:"stages,omitempty"`
	Shadow     *ShadowReport `json:"shadow,omitempty"`
	// Reason says why the rollout failed, was aborted or superseded.
	Reason string `json:"reason,omitempty"`
	// RolledBackTo is the revision that returned the nodes to the
	// baseline's config (a new version) after a failure or abort.
	RolledBackTo string    `json:"rolled_back_to,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Open reports whether the rollout may still move.
func (r *Rollout) Open() bool { return r.State == StatePending || r.State == StateStaging }

// StageRecord is what happened in one stage.
type StageRecord struct {
	Name     string    `json:"name"`
	Nodes    []string  `json:"nodes"` // the stage's own nodes when it opened
	OpenedAt time.Time `json:"opened_at"`
	ActiveAt time.Time `json:"active_at,omitzero"` // every node reported the version active
	DoneAt   time.Time `json:"done_at,omitzero"`
	Result   string    `json:"result,omitempty"` // passed, skipped (no nodes), failed
	Health   *Health   `json:"health,omitempty"` // the last comparison
}

// Health compares the nodes running the new version with the reference:
// the rest of the fleet, or the fleet's figures when the rollout started
// when no other node reports traffic.
type Health struct {
	At               time.Time `json:"at"`
	Nodes            int       `json:"nodes"` // running the new version
	Requests         uint64    `json:"requests"`
	ErrorRate        float64   `json:"error_rate"`
	LatencyMs        float64   `json:"latency_ms"`
	Reference        string    `json:"reference"` // "fleet" or "baseline"
	RefNodes         int       `json:"reference_nodes"`
	RefRequests      uint64    `json:"reference_requests"`
	RefErrorRate     float64   `json:"reference_error_rate"`
	RefLatencyMs     float64   `json:"reference_latency_ms"`
	Unready          []string  `json:"unready,omitempty"`
	Verdict          string    `json:"verdict"` // ok, worse, unready, no_data
	VerdictExplained string    `json:"explained,omitempty"`
}

// ShadowReport is the shadow check: the new revision's route decisions
// compared with the baseline's on a corpus of requests.
type ShadowReport struct {
	Baseline    string       `json:"baseline,omitempty"`
	Requests    int          `json:"requests"`
	Differences int          `json:"differences"`
	Unexpected  int          `json:"unexpected"` // differences no route change explains
	Listed      []Difference `json:"listed"`     // the first ones, unexpected first
	ElapsedMs   float64      `json:"elapsed_ms"`
}

// Difference is one request routed differently.
type Difference struct {
	Host     string `json:"host"`
	Method   string `json:"method"`
	Path     string `json:"path"`
	Old      string `json:"old"` // route id, or "404", "405", "400"
	New      string `json:"new"`
	Expected bool   `json:"expected"` // an added, removed or changed route explains it
}

// Diff lists what changed between two revisions.
type Diff struct {
	From     string        `json:"from"`
	To       string        `json:"to"`
	Added    []string      `json:"routes_added"`
	Removed  []string      `json:"routes_removed"`
	Changed  []RouteChange `json:"routes_changed"`
	Clusters struct {
		Added   []string `json:"added"`
		Removed []string `json:"removed"`
		Changed []string `json:"changed"`
	} `json:"clusters"`
	Sections []string `json:"sections_changed"` // other top-level sections that differ
}

// RouteChange names a route present in both revisions and its fields that
// differ, with both values.
type RouteChange struct {
	ID     string        `json:"id"`
	Fields []FieldChange `json:"fields"`
}

// FieldChange is one differing field.
type FieldChange struct {
	Field string `json:"field"`
	Old   any    `json:"old"`
	New   any    `json:"new"`
}
