package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

var (
	v1 = snapshot.Version{Epoch: 1, Sequence: 1}
	v2 = snapshot.Version{Epoch: 1, Sequence: 2}
)

func policy() *Policy {
	return &Policy{Stages: []Stage{
		{Name: "canary", Match: Match{Cohort: "canary"}},
		{Name: "zone", Match: Match{Zone: "z1"}},
		{Name: "empty", Match: Match{Region: "nowhere"}},
		{Name: "all"},
	}, ActiveTimeout: time.Minute, Bake: 10 * time.Second, NodeTimeout: 30 * time.Second,
		Health: Health{MaxErrorRateIncrease: 0.01, MinRequests: 100}}
}

func nodesAt(now time.Time, active map[string]snapshot.Version) []model.Node {
	ids := []model.Identity{{NodeID: "c", Zone: "z1", Cohort: "canary"}, {NodeID: "z", Zone: "z1"}, {NodeID: "o1", Zone: "z2"}, {NodeID: "o2", Zone: "z2"}}
	var out []model.Node
	for _, id := range ids {
		v, ok := active[id.NodeID]
		if !ok {
			v = v1
		}
		out = append(out, model.Node{Status: model.Status{Identity: id, Active: v, Ready: true, Requests: 1000, Errors: 5}, SeenAt: now})
	}
	return out
}

func TestStageOf(t *testing.T) {
	p := policy()
	for _, c := range []struct {
		id   model.Identity
		want int
	}{
		{model.Identity{NodeID: "a", Cohort: "canary", Zone: "z9"}, 0},
		{model.Identity{NodeID: "a", Zone: "z1"}, 1},
		{model.Identity{NodeID: "a", Region: "nowhere", Zone: "z1"}, 1},
		{model.Identity{NodeID: "a", Region: "nowhere"}, 2},
		{model.Identity{NodeID: "a"}, 3},
	} {
		if got := p.StageOf(c.id); got != c.want {
			t.Errorf("StageOf(%+v) = %d, want %d", c.id, got, c.want)
		}
	}
}

// A healthy rollout walks the stages: wait for active, bake, next; an
// empty stage is skipped; the last one completes.
func TestAdvanceThroughStages(t *testing.T) {
	p := policy()
	now := time.Unix(1000, 0)
	ro := &model.Rollout{Revision: "r2", Version: v2, State: model.StateStaging, Stage: -1}
	step := func(active map[string]snapshot.Version, d time.Duration, want Outcome) {
		t.Helper()
		now = now.Add(d)
		if got := p.Advance(now, ro, nodesAt(now, active)); got != want {
			t.Fatalf("at +%s: outcome %d, want %d (rollout %+v)", d, got, want, ro)
		}
	}
	step(nil, 0, Changed) // canary opens
	if ro.Stage != 0 || ro.Phase != model.PhaseWaiting || strings.Join(ro.Stages[0].Nodes, ",") != "c" {
		t.Fatalf("after open: %+v", ro)
	}
	step(nil, time.Second, Changed) // first health sample (no data yet)
	step(map[string]snapshot.Version{"c": v2}, time.Second, Changed)
	if ro.Phase != model.PhaseBaking {
		t.Fatalf("phase %s, want baking", ro.Phase)
	}
	step(map[string]snapshot.Version{"c": v2}, 5*time.Second, Changed) // health sample
	step(map[string]snapshot.Version{"c": v2}, 6*time.Second, Changed) // baked: zone opens
	if ro.Stage != 1 || ro.Stages[0].Result != "passed" {
		t.Fatalf("after canary: %+v", ro)
	}
	all := map[string]snapshot.Version{"c": v2, "z": v2, "o1": v2, "o2": v2}
	step(map[string]snapshot.Version{"c": v2, "z": v2}, time.Second, Changed)
	step(map[string]snapshot.Version{"c": v2, "z": v2}, 11*time.Second, Changed) // zone baked; "empty" skipped; "all" opens
	if ro.Stage != 3 || ro.Stages[2].Result != "skipped" || len(ro.Stages) != 4 {
		t.Fatalf("after zone: %+v", ro.Stages)
	}
	step(all, time.Second, Changed)
	step(all, 11*time.Second, Completed)
	if ro.State != model.StateDone {
		t.Fatalf("state %s", ro.State)
	}
}

func TestAdvanceFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		name   string
		mutate func([]model.Node)
		after  time.Duration
		why    string
	}{
		{"error rate", func(ns []model.Node) { ns[0].Errors = 300 }, time.Second, "error rate"},
		{"readiness", func(ns []model.Node) { ns[0].Ready = false }, time.Second, "lost readiness"},
		{"never active", func(ns []model.Node) { ns[0].Active = v1 }, 2 * time.Minute, "did not report"},
		{"refused at once", func(ns []model.Node) {
			ns[0].Active, ns[0].RefusedVersion, ns[0].RefusedReason = v1, v2, "build: open /etc/certs/x.pem: no such file or directory"
		}, 0, "node c refused " + v2.String() + ": build: open /etc/certs/x.pem"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policy()
			ro := &model.Rollout{Revision: "r2", Version: v2, State: model.StateStaging, Stage: -1}
			p.Advance(now, ro, nodesAt(now, nil))
			later := now.Add(c.after)
			ns := nodesAt(later, map[string]snapshot.Version{"c": v2})
			c.mutate(ns)
			if got := p.Advance(later, ro, ns); got != Failed || ro.State != model.StateFailed || !strings.Contains(ro.Reason, c.why) {
				t.Fatalf("outcome %d, rollout %+v", got, ro)
			}
		})
	}
}

// A refusal by a node outside the open stages (or of another version)
// does not fail the stage: only its own nodes' refusals of its version do.
func TestRefusalOutsideTheStage(t *testing.T) {
	p := policy()
	now := time.Unix(1000, 0)
	ro := &model.Rollout{Revision: "r2", Version: v2, State: model.StateStaging, Stage: -1}
	p.Advance(now, ro, nodesAt(now, nil))
	ns := nodesAt(now, nil)
	ns[2].RefusedVersion, ns[2].RefusedReason = v2, "build" // o1: stage "all", not open
	ns[0].RefusedVersion, ns[0].RefusedReason = v1, "stale" // the canary refused something else
	if got := p.Advance(now, ro, ns); got == Failed || ro.State != model.StateStaging {
		t.Fatalf("outcome %d, rollout %+v", got, ro)
	}
}

// A stage with bake 0 passes as soon as its nodes run the version: zero
// is zero, not "the default".
func TestZeroBake(t *testing.T) {
	p := policy()
	zero := time.Duration(0)
	p.Stages[0].Bake = &zero
	now := time.Unix(1000, 0)
	ro := &model.Rollout{Revision: "r2", Version: v2, State: model.StateStaging, Stage: -1}
	p.Advance(now, ro, nodesAt(now, nil))
	active := nodesAt(now, map[string]snapshot.Version{"c": v2})
	if p.Advance(now, ro, active) != Changed || ro.Phase != model.PhaseBaking {
		t.Fatalf("not baking: %+v", ro)
	}
	if p.Advance(now, ro, active) != Changed || ro.Stage != 1 || ro.Stages[0].Result != "passed" {
		t.Fatalf("a zero bake did not pass at once: %+v", ro)
	}
}

// Paused: no stage opens or passes, no timeout fails, but a health
// failure still fails.
func TestAdvancePaused(t *testing.T) {
	p := policy()
	now := time.Unix(1000, 0)
	ro := &model.Rollout{Revision: "r2", Version: v2, State: model.StateStaging, Stage: -1, Paused: true}
	if p.Advance(now, ro, nodesAt(now, nil)) != Unchanged || ro.Stage != -1 {
		t.Fatal("a paused rollout opened a stage")
	}
	ro.Paused = false
	p.Advance(now, ro, nodesAt(now, nil))
	ro.Paused = true
	later := now.Add(time.Hour)
	if p.Advance(later, ro, nodesAt(later, nil)); ro.State != model.StateStaging {
		t.Fatalf("a paused rollout timed out: %+v", ro)
	}
	ns := nodesAt(later, map[string]snapshot.Version{"c": v2})
	ns[0].Errors = 500
	if p.Advance(later, ro, ns) != Failed {
		t.Fatal("a paused rollout ignored a failing canary")
	}
}

// The reference is the rest of the fleet; without traffic there, the
// fleet's figures at the start.
func TestEvaluateReference(t *testing.T) {
	p := policy()
	now := time.Unix(1000, 0)
	ns := nodesAt(now, map[string]snapshot.Version{"c": v2})
	h := p.Evaluate(now, v2, 0, ns, 0, 0)
	if h.Reference != "fleet" || h.RefNodes != 3 || h.Verdict != VerdictOK {
		t.Fatalf("%+v", h)
	}
	for i := 1; i < len(ns); i++ {
		ns[i].Requests, ns[i].Errors = 0, 0
	}
	ns[0].Errors = 30 // 3 %
	if h := p.Evaluate(now, v2, 0, ns, 0.025, 0); h.Reference != "baseline" || h.Verdict != VerdictOK {
		t.Fatalf("within the margin of the baseline: %+v", h)
	}
	if h := p.Evaluate(now, v2, 0, ns, 0.001, 0); h.Verdict != VerdictWorse {
		t.Fatalf("above the baseline: %+v", h)
	}
	ns[0].Requests = 50
	if h := p.Evaluate(now, v2, 0, ns, 0, 0); h.Verdict != VerdictNoData {
		t.Fatalf("too few requests: %+v", h)
	}
}
