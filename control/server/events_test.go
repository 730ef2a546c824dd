package server_test

import (
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

// The engine moves on events, not on its tick (an hour here): a
// submission starts the rollout and opens the stage, the nodes' reports
// right after the swap (their report interval is an hour too, so no other
// report comes) make it bake, and the end of the bake passes it. With a
// tick-driven engine nothing would move for an hour.
func TestEngineMovesOnEvents(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		tu := fast
		tu.tick, tu.bake = time.Hour, 200*time.Millisecond
		// The nodes report only at start and after a swap: with the
		// harness's 5 s node timeout a busy machine could leave them lost
		// (and the stage skipped) before the rollout opens it.
		tu.nodeTimeout = time.Hour
		in := start(t, b.config(t, tu), "")
		in.waitLeader(t, 30*time.Second)
		nodes := map[string]*node{}
		for _, id := range []string{"ev-1", "ev-2", "ev-3"} {
			nodes[id] = newNodeTuned(t, in.url, model.Identity{NodeID: id, Region: "ap", Zone: "ap-1a"}, time.Hour, 20*time.Millisecond)
		}
		in.waitReported(t, len(nodes))
		start := time.Now()
		r := in.submit(t, cfgYAML(2, 100))
		ro := in.waitRollout(t, r.ID, 30*time.Second, model.StateDone, model.StateFailed)
		t.Logf("submit → done with a 1 h tick, bake 200ms: %s", time.Since(start).Round(time.Millisecond))
		last := ro.Stages[len(ro.Stages)-1]
		if ro.State != model.StateDone || last.Name != "all" || last.Result != "passed" || last.ActiveAt.IsZero() || len(last.Nodes) != 3 {
			t.Fatalf("rollout %+v", ro)
		}
		if d := last.DoneAt.Sub(last.ActiveAt); d < tu.bake {
			t.Fatalf("stage passed %s after its nodes were active, before its bake of %s", d, tu.bake)
		}
	})
}
