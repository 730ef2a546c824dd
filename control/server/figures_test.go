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
		in.waitLeader(t, 10*time.Second)
		nodes := tenNodes(t, in.url)
		eventually(t, 10*time.Second, "nodes to report", func() bool {
			var fv struct{ Nodes []any }
			in.call(t, readToken, "GET", "/v1/fleet", "", nil, nil, &fv)
			return len(fv.Nodes) == len(nodes)
		})
		var times []time.Duration
		for i, y := range []string{cfgYAML(2, 100), cfgYAML(3, 100), cfgYAML(4, 100)} {
			start := time.Now()
			r := in.submit(t, y)
			waitActive(t, nodes, r.Version, 30*time.Second)
			times = append(times, time.Since(start))
			ro := in.waitRollout(t, r.ID, 10*time.Second, model.StateDone, model.StateFailed)
			if ro.State != model.StateDone {
				t.Fatalf("revision %d: %+v", i, ro)
			}
		}
		t.Logf("FIGURE %s: submit → active on all 10 nodes through 4 stages (bake 50ms each): %v", b.name, times)
	})
}
