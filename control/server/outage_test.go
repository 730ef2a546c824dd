package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
)

// The control plane goes away: nodes keep their files and keep serving,
// a proxy restarted meanwhile serves its last-known-good, node clients
// retry with backoff; when the control plane returns (a new epoch), a new
// revision converges everywhere.
func TestControlPlaneDown(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		cfg := b.config(t, fast)
		in := start(t, cfg, "")
		in.waitLeader(t, 30*time.Second)
		nodes := fleet(t, in.url)
		r1 := baseline(t, in, nodes, cfgYAML(2, 100))
		addr := in.addr
		_ = in.srv.Close()

		eventually(t, 30*time.Second, "every node client to find the control plane unreachable", func() bool {
			for _, n := range nodes {
				if n.client.Control().State != nodeclient.ControlUnreachable {
					return false
				}
			}
			return true
		})
		for id, n := range nodes {
			if _, err := os.Stat(filepath.Join(n.dir, "snapshots", snapFile(r1))); err != nil {
				t.Fatalf("%s: snapshot file gone while the control plane is down: %v", id, err)
			}
			if v := n.fake().Active(); v != r1.Version {
				t.Fatalf("%s runs %s, want %s", id, v, r1.Version)
			}
		}
		restarted := nodes["zone-1"]
		restarted.stopProx()
		restarted.startProxy(t)
		if v := restarted.fake().Active(); v != r1.Version {
			t.Fatalf("a proxy restarted during the outage serves %s, want its last-known-good %s", v, r1.Version)
		}

		in2 := start(t, cfg, addr)
		in2.waitLeader(t, 30*time.Second)
		if e := in2.srv.Store.Leader().Epoch; e <= r1.Version.Epoch {
			t.Fatalf("epoch after the restart %d, want above %d", e, r1.Version.Epoch)
		}
		r2 := in2.submit(t, cfgYAML(3, 100))
		ro := in2.waitRollout(t, r2.ID, 30*time.Second, model.StateDone, model.StateFailed)
		if ro.State != model.StateDone {
			t.Fatalf("rollout after the restart: %+v", ro)
		}
		waitActive(t, nodes, r2.Version, 30*time.Second)
	})
}

func snapFile(r *model.Revision) string {
	return fmt.Sprintf("%d-%d.snap", r.Version.Epoch, r.Version.Sequence)
}
