package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// A revision the canary's proxy cannot build fails the canary stage on
// that refusal — with the node's reason in the rollout record and the
// fleet view — long before active_timeout (an hour here); the canary
// returns to the baseline and no later stage gets the revision.
func TestRefusalFailsTheStageAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		tu := fast
		tu.activeTimeout = time.Hour
		in := start(t, b.config(t, tu), "")
		in.waitLeader(t, 30*time.Second)
		nodes := fleet(t, in.url)
		r1 := baseline(t, in, nodes, cfgYAML(2, 100))
		canary := nodes["canary-1"].fake()
		canary.mu.Lock()
		next := snapshot.Version{Epoch: r1.Version.Epoch, Sequence: r1.Version.Sequence + 1} // r2's
		canary.refuse = func(v snapshot.Version) error {
			if v != next {
				return nil
			}
			return fmt.Errorf(`listener "tls": load certificate /etc/rampart/tls/api.pem: open /etc/rampart/tls/api.pem: no such file or directory`)
		}
		canary.mu.Unlock()
		start := time.Now()
		r2 := in.submit(t, cfgYAML(3, 100))
		if r2.Version != next {
			t.Fatalf("r2 is %s, expected %s", r2.Version, next)
		}
		ro := in.waitRollout(t, r2.ID, 60*time.Second, model.StateFailed, model.StateDone)
		t.Logf("submit → failed on the canary's refusal: %s", time.Since(start).Round(time.Millisecond))
		if ro.State != model.StateFailed || len(ro.Stages) != 1 || ro.Stages[0].Result != "failed" ||
			!strings.Contains(ro.Reason, "node canary-1 refused "+r2.Version.String()) || !strings.Contains(ro.Reason, "build: ") ||
			!strings.Contains(ro.Reason, "/etc/rampart/tls/api.pem: no such file") || ro.RolledBackTo == "" {
			t.Fatalf("rollout %+v", ro)
		}
		var fv struct {
			Nodes []struct {
				NodeID         string           `json:"node_id"`
				Refused        uint64           `json:"refused"`
				RefusedVersion snapshot.Version `json:"refused_version"`
				RefusedReason  string           `json:"refused_reason"`
			}
		}
		in.call(t, readToken, "GET", "/v1/fleet", "", nil, nil, &fv)
		found := false
		for _, n := range fv.Nodes {
			if n.NodeID == "canary-1" {
				found = n.Refused >= 1 && n.RefusedVersion == r2.Version && strings.Contains(n.RefusedReason, "api.pem")
			}
		}
		if !found {
			t.Fatalf("fleet view: %+v", fv.Nodes)
		}
		for id, n := range nodes {
			if has(n.fake().Applied(), r2.Version) {
				t.Errorf("node %s applied the refused revision", id)
			}
		}
	})
}
