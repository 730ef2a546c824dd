package bpf

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

func TestOpenNamesWhatIsMissing(t *testing.T) {
	needRoot(t)
	_, err := Open(filepath.Join(t.TempDir(), "rampart"), nil)
	if err == nil || !strings.Contains(err.Error(), "bpffs not mounted") {
		t.Fatalf("Open on a plain directory: %v", err)
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
		cmd := exec.Command(setpriv, "--bounding-set="+c.drop, "--", os.Args[0], "-test.run=^TestProbeChild$", "-test.v")
		cmd.Env = append(os.Environ(), "RAMPART_PROBE_CHILD=1")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("without %s: %s", c.drop, out)
		}
	}
}

// TestProbeChild runs Probe for TestOpenNamesWhatIsMissing in a process
// with fewer capabilities.
func TestProbeChild(t *testing.T) {
	if os.Getenv("RAMPART_PROBE_CHILD") != "1" {
		return // only a helper
	}
	var ce *CapabilityError
	if err := Probe(); !errors.As(err, &ce) {
		t.Fatalf("Probe: %v", err)
	} else {
		t.Log(err)
	}
}

// TestAgentCapabilities runs Open, every attach and map write in a process
// holding only CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON (in its own netns).
func TestAgentCapabilities(t *testing.T) {
	needRoot(t)
	ns := netnstest.New(t, "rt")
	root := netnstest.PinRoot(t)
	caps := "-all,+bpf,+net_admin,+perfmon"
	cmd := exec.Command("nsenter", "--net="+ns.Path, "setpriv", "--inh-caps="+caps, "--bounding-set="+caps,
		"--", os.Args[0], "-test.run=^TestCapsChild$", "-test.v")
	cmd.Env = append(os.Environ(), "RAMPART_CAPS_ROOT="+root)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "all done") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestCapsChild is the process for TestAgentCapabilities.
func TestCapsChild(t *testing.T) {
	root := os.Getenv("RAMPART_CAPS_ROOT")
	if root == "" {
		return // only a helper
	}
	f, err := Open(root, &Options{MaxSources: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Remove()
	if _, err := f.AttachXDP("lo", XDPAuto); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.AttachSkLookup("/proc/self/ns/net"), f.AttachConnTracker(""),
		f.SetVIPs(testVIPs), f.ReplaceDenyList(nil), f.SetLimits(Limits{PPS: 10})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadCounters(); err != nil {
		t.Fatal(err)
	}
	t.Log("all done")
}
