package lab

import (
	"encoding/json"
	"net/netip"
	"os"
	"testing"

	"github.com/rampart-edge/rampart/control/revision"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/lab/demo"
)

// TestBreakEndpoints: the bad revision of bad-rollout is the demo config
// with every endpoint moved to a dead port, and the control plane takes it
// (it must fail by health, not at submission).
func TestBreakEndpoints(t *testing.T) {
	p, err := demo.Write(t.TempDir(), demo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(p.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := revision.Parse(body, "application/yaml")
	if err != nil {
		t.Fatal(err)
	}
	canon, err := snapshot.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	broken, err := breakEndpoints(canon)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := revision.Parse(broken, "application/json")
	if err != nil {
		t.Fatalf("the control plane would refuse the bad revision: %v", err)
	}
	if err := revision.Check(bad, snapshot.Version{Epoch: 1, Sequence: 2}); err != nil {
		t.Fatalf("the bad revision does not validate: %v", revision.Problems(err))
	}
	n := 0
	for i, cl := range bad.Clusters {
		for j, ep := range cl.Endpoints {
			was := netip.MustParseAddrPort(cfg.Clusters[i].Endpoints[j].Address)
			now := netip.MustParseAddrPort(ep.Address)
			if now.Addr() != was.Addr() || now.Port() != was.Port()+badPortShift {
				t.Errorf("endpoint %s became %s, want port +%d", was, now, badPortShift)
			}
			n++
		}
	}
	if n != 8 {
		t.Errorf("%d endpoints, want the demo's 8", n)
	}
	if len(bad.Routes) != len(cfg.Routes) {
		t.Errorf("routes changed: %d → %d", len(cfg.Routes), len(bad.Routes))
	}
	if _, err := breakEndpoints([]byte(`{"clusters":[]}`)); err == nil {
		t.Error("a config without endpoints was broken")
	}
	var v any
	if err := json.Unmarshal(broken, &v); err != nil {
		t.Errorf("not JSON: %v", err)
	}
}
