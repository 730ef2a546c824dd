// Package rollout decides how a revision moves through the stages of a
// staged rollout: which nodes belong to which stage, when a stage's nodes
// all run the new version, how their health compares with the rest of the
// fleet, and when the revision passes a stage or fails. It is pure logic
// over model types; control/plane stores and publishes what it decides.
package rollout

import (
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

// Match selects nodes by identity; empty fields match anything, so the
// zero Match selects every node.
type Match struct {
	Region string `yaml:"region" json:"region,omitempty"`
	Zone   string `yaml:"zone" json:"zone,omitempty"`
	Cohort string `yaml:"cohort" json:"cohort,omitempty"`
}

func (m Match) matches(id model.Identity) bool {
	return (m.Region == "" || m.Region == id.Region) && (m.Zone == "" || m.Zone == id.Zone) &&
		(m.Cohort == "" || m.Cohort == id.Cohort)
}

// Stage is one step of a rollout. A node belongs to the first stage that
// matches it; a stage opened gives the revision to its nodes and to those
// of every earlier stage.
type Stage struct {
	Name  string
	Match Match
	Bake  *time.Duration // nil: the policy's Bake; zero means zero
}

// Health bounds how much worse the nodes on a new version may do than the
// reference (the rest of the fleet, else the fleet when the rollout began).
type Health struct {
	// MaxErrorRateIncrease is the margin, in absolute error rate (0.01 =
	// one percentage point), by which the new version may exceed the
	// reference before the revision fails.
	MaxErrorRateIncrease float64
	// MinRequests is how many requests the new version's nodes must have
	// served before their error rate is judged (fewer: no verdict).
	MinRequests uint64
	// MaxLatencyIncreaseMs fails a revision whose mean latency exceeds the
	// reference's by more than this; 0 turns the check off.
	MaxLatencyIncreaseMs float64
}

// Policy is how rollouts proceed.
type Policy struct {
	Stages []Stage
	// ActiveTimeout: a stage whose nodes do not all report the version
	// active within it fails the revision.
	ActiveTimeout time.Duration
	Bake          time.Duration // per stage, unless the stage says otherwise
	Health        Health
	// NodeTimeout: nodes not heard from within it are left out of stages
	// and comparisons (and shown as lost).
	NodeTimeout time.Duration
}

// DefaultStages: canary cohort, one zone, one region, then every node.
func DefaultStages() []Stage {
	return []Stage{
		{Name: "canary", Match: Match{Cohort: "canary"}},
		{Name: "zone", Match: Match{Zone: "zone-a"}},
		{Name: "region", Match: Match{Region: "region-a"}},
		{Name: "all"},
	}
}

// Validate reports a policy that cannot work.
func (p *Policy) Validate() error {
	if len(p.Stages) == 0 {
		return fmt.Errorf("rollout: at least one stage is required")
	}
	seen := map[string]bool{}
	for i, s := range p.Stages {
		if s.Name == "" {
			return fmt.Errorf("rollout: stage #%d has no name", i+1)
		}
		if seen[s.Name] {
			return fmt.Errorf("rollout: stage %q is listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Bake != nil && *s.Bake < 0 {
			return fmt.Errorf("rollout: stage %q: bake %s is negative", s.Name, *s.Bake)
		}
	}
	switch {
	case p.ActiveTimeout <= 0:
		return fmt.Errorf("rollout: active_timeout must be positive")
	case p.Bake < 0:
		return fmt.Errorf("rollout: bake must not be negative")
	case p.NodeTimeout <= 0:
		return fmt.Errorf("rollout: node_timeout must be positive")
	case p.Health.MaxErrorRateIncrease < 0 || p.Health.MaxErrorRateIncrease > 1:
		return fmt.Errorf("rollout: health.max_error_rate_increase must be between 0 and 1")
	case p.Health.MaxLatencyIncreaseMs < 0:
		return fmt.Errorf("rollout: health.max_latency_increase_ms must not be negative")
	}
	return nil
}

// StageOf is the index of the first stage matching id, or -1.
func (p *Policy) StageOf(id model.Identity) int {
	for i, s := range p.Stages {
		if s.Match.matches(id) {
			return i
		}
	}
	return -1
}

// Gets reports whether a node of identity id runs the rollout's revision
// at stage index open (-1: no stage open yet).
func (p *Policy) Gets(id model.Identity, open int) bool {
	s := p.StageOf(id)
	return s >= 0 && s <= open
}

// Live returns the nodes heard from within NodeTimeout of now.
func (p *Policy) Live(nodes []model.Node, now time.Time) []model.Node {
	var out []model.Node
	for _, n := range nodes {
		if now.Sub(n.SeenAt) <= p.NodeTimeout {
			out = append(out, n)
		}
	}
	return out
}

// BakeOf is how long stage i bakes: its own bake when set (zero
// included), else the policy's.
func (p *Policy) BakeOf(i int) time.Duration { return p.bake(i) }

func (p *Policy) bake(i int) time.Duration {
	if b := p.Stages[i].Bake; b != nil {
		return *b
	}
	return p.Bake
}
