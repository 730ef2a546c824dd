package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// stageOrder is the order stages open; nodes of a later stage never get
// the revision before the nodes of an earlier one.
var stageOrder = [][]string{{"canary-1"}, {"zone-1"}, {"region-1"}, {"us-1", "us-2"}}

// A revision goes canary → zone → region → all, each stage waiting for
// its nodes to run it and baking, with the shadow check's differences in
// the record; every node ends on it.
func TestRolloutThroughAllStages(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		in := start(t, b.config(t, fast), "")
		in.waitLeader(t, 30*time.Second)
		nodes := fleet(t, in.url)
		r1 := in.submit(t, cfgYAML(2, 100))
		waitActive(t, nodes, r1.Version, 30*time.Second)
		in.waitRollout(t, r1.ID, 30*time.Second, model.StateDone)

		r2 := in.submit(t, cfgYAML(3, 200))
		ro := in.waitRollout(t, r2.ID, 30*time.Second, model.StateDone, model.StateFailed)
		if ro.State != model.StateDone {
			t.Fatalf("rollout %s: %+v", r2.ID, ro)
		}
		waitActive(t, nodes, r2.Version, 30*time.Second)
		if ro.Baseline != r1.ID || len(ro.Stages) != 4 {
			t.Fatalf("rollout record: baseline %s, stages %+v", ro.Baseline, ro.Stages)
		}
		for i, s := range ro.Stages {
			if s.Result != "passed" || s.ActiveAt.IsZero() || s.DoneAt.Before(s.ActiveAt) || s.Health == nil {
				t.Errorf("stage %d %s: %+v", i, s.Name, s)
			}
			if strings.Join(s.Nodes, ",") != strings.Join(stageOrder[i], ",") {
				t.Errorf("stage %s nodes %v, want %v", s.Name, s.Nodes, stageOrder[i])
			}
		}
		// Stage by stage: each node got r2 only after the previous stage baked.
		for i := 1; i < len(stageOrder); i++ {
			for _, id := range stageOrder[i] {
				got := nodes[id].fake().AppliedAt(r2.Version)
				if got.Before(ro.Stages[i-1].DoneAt.Add(-50 * time.Millisecond)) {
					t.Errorf("%s applied %s at %s, before stage %s passed at %s", id, r2.Version, got, ro.Stages[i-1].Name, ro.Stages[i-1].DoneAt)
				}
			}
		}
		// The shadow check compared r2 with r1: route-3's paths changed, expectedly.
		sh := ro.Shadow
		if sh == nil || sh.Baseline != r1.ID || sh.Differences == 0 || sh.Unexpected != 0 || len(sh.Listed) == 0 {
			t.Fatalf("shadow report: %+v", sh)
		}
		for _, d := range sh.Listed {
			if (d.New != "route-3" && d.New != "405") || d.Old != "404" || !strings.HasPrefix(d.Path, "/v1/things3/") || !d.Expected {
				t.Errorf("difference %+v", d)
			}
		}
		// Fleet view: every node converged and live.
		var fv struct {
			Stable string
			Nodes  []struct {
				Live, Converged bool
				NodeID          string `json:"node_id"`
				Stage           string
			}
		}
		eventually(t, 30*time.Second, "the fleet view to show every node converged on "+r2.ID, func() bool {
			in.call(t, readToken, "GET", "/v1/fleet", "", nil, nil, &fv)
			if fv.Stable != r2.ID || len(fv.Nodes) != 5 {
				return false
			}
			for _, n := range fv.Nodes {
				if !n.Live || !n.Converged || n.Stage == "" {
					return false
				}
			}
			return true
		})
	})
}

// baseline puts a config on every node at once, without baking through
// the stages: submit, abort, and roll back to it unstaged.
func baseline(t *testing.T, in *instance, nodes map[string]*node, yaml string) *model.Revision {
	t.Helper()
	r := in.submit(t, yaml)
	in.call(t, adminToken, "POST", "/v1/rollouts/"+r.ID+"/abort", "", nil, nil, nil)
	var rb model.Revision
	if resp := in.call(t, adminToken, "POST", "/v1/rollback", "application/json", []byte(`{"to":"`+r.ID+`"}`), nil, &rb); resp.StatusCode != 201 {
		t.Fatalf("rollback: %d %s", resp.StatusCode, bodyOf(resp))
	}
	waitActive(t, nodes, rb.Version, 30*time.Second)
	return &rb
}

// A revision that breaks the canary's error rate fails there: the canary
// returns to the previous config under a new version, and no node of a
// later stage ever gets the broken revision.
func TestCanaryFailureRollsBack(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		tu := fast
		// The stage never passes on its own: only the health gate ends it,
		// however long a busy machine takes to get the canary's reports in.
		tu.bake = time.Hour
		in := start(t, b.config(t, tu), "")
		in.waitLeader(t, 30*time.Second)
		nodes := fleet(t, in.url)
		r1 := baseline(t, in, nodes, cfgYAML(2, 100))

		r2 := in.submit(t, cfgYAML(3, 100))
		nodes["canary-1"].setErrRate(func(v snapshot.Version) float64 {
			if v == r2.Version {
				return 0.5
			}
			return 0
		})
		ro := in.waitRollout(t, r2.ID, 30*time.Second, model.StateFailed, model.StateDone)
		if ro.State != model.StateFailed || ro.RolledBackTo == "" || len(ro.Stages) != 1 || ro.Stages[0].Result != "failed" ||
			!strings.Contains(ro.Reason, "error rate") {
			t.Fatalf("rollout: %+v", ro)
		}
		var rb model.Revision
		in.call(t, readToken, "GET", "/v1/revisions/"+ro.RolledBackTo, "", nil, nil, &rb)
		if rb.Kind != model.KindRollback || rb.Source != r1.ID || rb.ConfigSHA256 != r1.ConfigSHA256 || !r2.Version.Less(rb.Version) {
			t.Fatalf("rollback revision %+v", rb)
		}
		waitActive(t, nodes, rb.Version, 30*time.Second)
		if !has(nodes["canary-1"].fake().Applied(), r2.Version) {
			t.Fatal("the canary never ran the failed revision")
		}
		for id, n := range nodes {
			if id != "canary-1" && has(n.fake().Applied(), r2.Version) {
				t.Errorf("node %s (a later stage) got the failed revision %s", id, r2.Version)
			}
		}
	})
}

// Pause holds a rollout (pending or mid-stage), resume lets it go on,
// abort ends it and returns its nodes to the previous config.
func TestPauseResumeAbort(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		tu := fast
		tu.bake = time.Hour // nothing passes a stage on its own
		in := start(t, b.config(t, tu), "")
		in.waitLeader(t, 30*time.Second)
		nodes := fleet(t, in.url)
		base := baseline(t, in, nodes, cfgYAML(2, 100))

		steer := func(id, action string, want int) *model.Rollout {
			var ro model.Rollout
			if r := in.call(t, adminToken, "POST", "/v1/rollouts/"+id+"/"+action, "application/json", []byte(`{"reason":"test"}`), nil, &ro); r.StatusCode != want {
				t.Fatalf("%s %s: %d %s", action, id, r.StatusCode, bodyOf(r))
			}
			return &ro
		}
		// Paused while pending: it does not start. The engine starts a
		// submission at once (and opens its first stage in the same
		// wake-up), so r2 is made to queue first: behind a revision its
		// shadow check holds (staging, no stage open, nothing published).
		blocker := in.submit(t, "routing: {encoded_slashes: decode}\n"+cfgYAML(2, 100))
		eventually(t, 30*time.Second, "the shadow check to hold "+blocker.ID, func() bool {
			ro := in.rollout(t, blocker.ID)
			return ro.State == model.StateStaging && ro.Paused && ro.Shadow != nil
		})
		r2 := in.submit(t, cfgYAML(3, 100))
		if ro := steer(r2.ID, "pause", 200); !ro.Paused || ro.State != model.StatePending {
			t.Fatalf("pause: %+v", ro)
		}
		if ro := steer(blocker.ID, "abort", 200); ro.State != model.StateAborted || ro.RolledBackTo != "" {
			t.Fatalf("abort %s: %+v", blocker.ID, ro)
		}
		time.Sleep(300 * time.Millisecond) // the abort woke the engine: it must leave r2 alone
		if ro := in.rollout(t, r2.ID); ro.State != model.StatePending || ro.Stage != -1 || len(ro.Stages) != 0 || has(nodes["canary-1"].fake().Applied(), r2.Version) {
			t.Fatalf("a paused rollout moved: %+v", ro)
		}
		steer(r2.ID, "resume", 200)
		eventually(t, 30*time.Second, "the canary to run "+r2.Version.String(), func() bool {
			return nodes["canary-1"].fake().Active() == r2.Version
		})
		eventually(t, 30*time.Second, "the canary stage to bake", func() bool { return in.rollout(t, r2.ID).Phase == model.PhaseBaking })
		steer(r2.ID, "pause", 200)
		steer(r2.ID, "resume", 200)
		steer(r2.ID, "pause", 200)
		ro := steer(r2.ID, "abort", 200)
		if ro.State != model.StateAborted || ro.RolledBackTo == "" {
			t.Fatalf("abort: %+v", ro)
		}
		steer(r2.ID, "resume", 409) // closed for good
		var rb model.Revision
		in.call(t, readToken, "GET", "/v1/revisions/"+ro.RolledBackTo, "", nil, nil, &rb)
		waitActive(t, nodes, rb.Version, 30*time.Second)
		if rb.ConfigSHA256 != base.ConfigSHA256 {
			t.Fatalf("abort returned to %+v, want the config of %s", rb, base.ID)
		}
		for id, n := range nodes {
			if id != "canary-1" && has(n.fake().Applied(), r2.Version) {
				t.Errorf("node %s got the aborted revision", id)
			}
		}
	})
}

// With shadow.max_unexpected_differences set, a revision whose route
// decisions move in ways no route change explains waits for approval.
func TestShadowCheckHoldsUnexpectedDifferences(t *testing.T) {
	b := backend{name: "embedded", dir: t.TempDir()}
	tu := fast
	tu.extra = "  shadow: {max_unexpected_differences: 0}\n"
	in := start(t, b.config(t, tu), "")
	in.waitLeader(t, 30*time.Second)
	r1 := in.submit(t, cfgYAML(2, 100))
	in.waitRollout(t, r1.ID, 30*time.Second, model.StateDone)
	r2 := in.submit(t, "routing: {encoded_slashes: decode}\n"+cfgYAML(2, 100))
	var ro *model.Rollout
	eventually(t, 30*time.Second, "the shadow check to pause the rollout", func() bool {
		ro = in.rollout(t, r2.ID)
		return ro.Paused && ro.Shadow != nil
	})
	if ro.Shadow.Unexpected == 0 || !strings.Contains(ro.PauseReason, "shadow check") || ro.Shadow.Listed[0].Expected {
		t.Fatalf("rollout %+v shadow %+v", ro, ro.Shadow)
	}
	if d := ro.Shadow.Listed[0]; d.Old != "400" || !strings.Contains(d.Path, "%2F") {
		t.Fatalf("first difference %+v", d)
	}
	in.call(t, adminToken, "POST", "/v1/rollouts/"+r2.ID+"/resume", "", nil, nil, nil)
	in.waitRollout(t, r2.ID, 30*time.Second, model.StateDone)
}
