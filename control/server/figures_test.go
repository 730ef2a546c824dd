package server_test

import (
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

// FIGURE: publish → active on 10 simulated nodes through all four
// stages (1, 2, 3 and 4 nodes), with a 50 ms bake per stage, a 20 ms
// engine tick and 50 ms status reports. Logged, not asserted.
func TestFigurePublishToActive10Nodes(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		tu := fast
		tu.bake = 50 * time.Millisecond
		in := start(t, b.config(t, tu), "")
		in.waitLeader(t, 30*time.Second)
		nodes := tenNodes(t, in.url)
		in.waitReported(t, len(nodes))
		var times []time.Duration
		for i, y := range []string{cfgYAML(2, 100), cfgYAML(3, 100), cfgYAML(4, 100)} {
			start := time.Now()
			r := in.submit(t, y)
			waitActive(t, nodes, r.Version, 30*time.Second)
			times = append(times, time.Since(start))
			ro := in.waitRollout(t, r.ID, 30*time.Second, model.StateDone, model.StateFailed)
			if ro.State != model.StateDone {
				t.Fatalf("revision %d: %+v", i, ro)
			}
		}
		t.Logf("FIGURE %s: submit → active on all 10 nodes through 4 stages (bake 50ms each): %v", b.name, times)
	})
}

// FIGURE: publish → active on 3 nodes in one stage, 10 runs, with the
// defaults a deployment has: the 1 s engine tick, node reports every 5 s,
// the proxy's 250 ms snapshot dir poll, a bake of 1 ms. "nodes" is submit
// until every node's proxy applied the version; "plane" is submit until
// the rollout is done (the plane saw every node active). Logged, not
// asserted: go test -v -run FigurePublishToActive3Nodes ./control/server
func TestFigurePublishToActive3Nodes(t *testing.T) {
	b := backend{name: "embedded", dir: t.TempDir()}
	tu := fast
	tu.tick, tu.bake = time.Second, time.Millisecond
	// The nodes report every 5 s: with the harness's 5 s node timeout one
	// late report leaves a node lost when a stage opens. 30 s is the
	// default.
	tu.nodeTimeout = 30 * time.Second
	tu.extra = "  shadow: {max_unexpected_differences: -1}\n"
	in := start(t, b.config(t, tu), "")
	in.waitLeader(t, 30*time.Second)
	nodes := map[string]*node{}
	for _, id := range []string{"n-1", "n-2", "n-3"} {
		nodes[id] = newNodeTuned(t, in.url, model.Identity{NodeID: id, Region: "ap", Zone: "ap-1a"}, 5*time.Second, 250*time.Millisecond)
	}
	in.waitReported(t, len(nodes))
	var onNodes, onPlane []time.Duration
	for i := 0; i < 10; i++ {
		start := time.Now()
		r := in.submit(t, cfgYAML(2+i%3, 100+i))
		waitActive(t, nodes, r.Version, 30*time.Second)
		onNodes = append(onNodes, time.Since(start).Round(time.Millisecond))
		ro := in.waitRollout(t, r.ID, 30*time.Second, model.StateDone, model.StateFailed)
		onPlane = append(onPlane, time.Since(start).Round(time.Millisecond))
		if ro.State != model.StateDone || len(ro.Stages) == 0 || ro.Stages[len(ro.Stages)-1].Result != "passed" {
			t.Fatalf("run %d: rollout %+v", i, ro)
		}
	}
	t.Logf("FIGURE publish → active on 3 nodes, one stage, tick 1s, reports 5s, dir poll 250ms, 10 runs: nodes %v; plane (rollout done) %v",
		onNodes, onPlane)
}
