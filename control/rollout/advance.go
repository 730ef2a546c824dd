package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

// Outcome of Advance.
type Outcome int

const (
	Unchanged Outcome = iota
	Changed           // the rollout record changed; store it
	Failed            // the revision failed (State failed, Reason set); roll back
	Completed         // every stage passed (State done); the revision is stable
)

// healthEvery is how often a passing health sample is recorded.
const healthEvery = 2 * time.Second

// Advance moves a staging rollout on, given the nodes' latest reports:
// it opens the first stage, waits for the open stage's nodes to report
// the version active (failing at once when one of them refuses it, else
// after ActiveTimeout), bakes it while
// comparing health, and opens the next stage or completes. A health
// verdict of worse or unready fails the revision at any point, paused or
// not; a paused rollout otherwise stands still.
func (p *Policy) Advance(now time.Time, ro *model.Rollout, nodes []model.Node) Outcome {
	if ro.State != model.StateStaging {
		return Unchanged
	}
	live := p.Live(nodes, now)
	if ro.Stage >= len(p.Stages) { // the policy lost stages since: its last one is open
		ro.Stage = len(p.Stages) - 1
	}
	if ro.Stage < 0 || len(ro.Stages) == 0 {
		if ro.Paused {
			return Unchanged
		}
		return p.open(now, ro, 0, live)
	}
	rec := &ro.Stages[len(ro.Stages)-1]
	if refused := p.refusals(ro, live); len(refused) > 0 {
		return fail(now, ro, rec, fmt.Sprintf("stage %s: %s", rec.Name, strings.Join(refused, "; ")))
	}
	h := p.Evaluate(now, ro.Version, ro.Stage, live, ro.BaselineErr, ro.BaselineLat)
	out := Unchanged
	if rec.Health == nil || rec.Health.Verdict != h.Verdict || now.Sub(rec.Health.At) >= healthEvery {
		rec.Health, out = &h, Changed
	}
	if h.Verdict == VerdictWorse || h.Verdict == VerdictUnready {
		return fail(now, ro, rec, fmt.Sprintf("stage %s: %s", rec.Name, h.VerdictExplained))
	}
	if ro.Paused {
		return out
	}
	switch ro.Phase {
	case model.PhaseWaiting:
		missing := p.notActive(ro, live)
		if len(missing) == 0 {
			ro.Phase, ro.PhaseSince, rec.ActiveAt = model.PhaseBaking, now, now
			return Changed
		}
		if now.Sub(ro.PhaseSince) > p.ActiveTimeout {
			return fail(now, ro, rec, fmt.Sprintf("stage %s: nodes %v did not report %s active within %s",
				rec.Name, missing, ro.Version, p.ActiveTimeout))
		}
	case model.PhaseBaking:
		if now.Sub(ro.PhaseSince) >= p.bake(ro.Stage) {
			rec.DoneAt, rec.Result = now, "passed"
			return p.open(now, ro, ro.Stage+1, live)
		}
	}
	return out
}

// open opens stage i (skipping stages without live nodes), or completes
// the rollout after the last one.
func (p *Policy) open(now time.Time, ro *model.Rollout, i int, live []model.Node) Outcome {
	for ; i < len(p.Stages); i++ {
		var own []string
		for _, n := range live {
			if p.StageOf(n.Identity) == i {
				own = append(own, n.NodeID)
			}
		}
		sort.Strings(own)
		rec := model.StageRecord{Name: p.Stages[i].Name, Nodes: own, OpenedAt: now}
		ro.Stage, ro.Phase, ro.PhaseSince = i, model.PhaseWaiting, now
		if len(own) == 0 {
			rec.DoneAt, rec.Result = now, "skipped"
			ro.Stages = append(ro.Stages, rec)
			continue
		}
		ro.Stages = append(ro.Stages, rec)
		return Changed
	}
	ro.State, ro.Phase = model.StateDone, ""
	return Completed
}

// notActive lists the live nodes of the open stages not yet reporting the
// rollout's version active.
func (p *Policy) notActive(ro *model.Rollout, live []model.Node) []string {
	var out []string
	for _, n := range live {
		if p.Gets(n.Identity, ro.Stage) && n.Active != ro.Version {
			out = append(out, n.NodeID)
		}
	}
	return out
}

// refusals lists "node X refused V: reason" for the live nodes of the open
// stages that refused the rollout's version.
func (p *Policy) refusals(ro *model.Rollout, live []model.Node) []string {
	var out []string
	for _, n := range live {
		if p.Gets(n.Identity, ro.Stage) && n.RefusedVersion == ro.Version && n.Active != ro.Version {
			out = append(out, fmt.Sprintf("node %s refused %s: %s", n.NodeID, ro.Version, n.RefusedReason))
		}
	}
	sort.Strings(out)
	return out
}

func fail(now time.Time, ro *model.Rollout, rec *model.StageRecord, why string) Outcome {
	rec.DoneAt, rec.Result = now, "failed"
	ro.State, ro.Reason, ro.Phase = model.StateFailed, why, ""
	return Failed
}
