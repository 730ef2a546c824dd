package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/bpf/netnstest"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// needRoot skips outside CI when not root, naming what is missing.
func needRoot(t testing.TB) {
	t.Helper()
	netnstest.NeedRoot(t, "CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON and CAP_SYS_ADMIN (bpffs mounts, network namespaces)")
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	_, err := New(Config{})
	for _, want := range []string{"state directory", "snapshot directory", "public key", "interface"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(Config{}) = %v; want it to mention %q", err, want)
		}
	}
}

func TestPreflightNamesWhatIsMissing(t *testing.T) {
	needRoot(t)
	plain := filepath.Join(t.TempDir(), "rampart")
	err := Preflight(plain)
	if err == nil || !strings.Contains(err.Error(), "bpffs is not mounted at "+filepath.Dir(plain)) ||
		!strings.Contains(err.Error(), "service unit") {
		t.Fatalf("Preflight on a plain directory: %v", err)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop capabilities: %v", err)
	}
	for _, c := range []struct{ drop, want string }{
		{"-bpf,-sys_admin", "missing CAP_BPF"},
		{"-net_admin", "missing CAP_NET_ADMIN"},
		{"-perfmon,-sys_admin", "missing CAP_PERFMON"},
	} {
		cmd := exec.Command(setpriv, "--bounding-set="+c.drop, "--", os.Args[0], "-test.run=^TestPreflightChild$", "-test.v")
		cmd.Env = append(os.Environ(), "RAMPART_AGENT_PREFLIGHT_CHILD="+plain)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "AmbientCapabilities") {
			t.Errorf("without %s: %s", c.drop, out)
		}
	}
}

// TestPreflightChild runs the agent for TestPreflightNamesWhatIsMissing in a
// process with fewer capabilities.
func TestPreflightChild(t *testing.T) {
	root := os.Getenv("RAMPART_AGENT_PREFLIGHT_CHILD")
	if root == "" {
		return // only a helper
	}
	_, pubPEM, _ := snapshot.GenerateKey()
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	a, err := New(Config{Interfaces: []string{"lo"}, StateDir: t.TempDir(), SnapshotDir: t.TempDir(), PublicKey: pub, PinRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil {
		t.Fatal("the agent ran without its capabilities")
	} else {
		t.Log(err)
	}
}
