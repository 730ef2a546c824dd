package control

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// runtimePackages are the parts of a node the control plane must not
// depend on (directly or through another package).
var runtimePackages = []string{
	"l7/snapdir", "l7/docwatch", "l7/denywatch", "l7/regionwatch", "l7/proxy", "l7/daemon", "agent", "bpf", "anycast",
}

// TestControlImportsNoRuntime lists what the control plane's packages
// depend on (go list -deps ./..., the non-test build) and fails on any
// runtime package. Tests of control/ may start real proxies; the check is
// on what ships.
func TestControlImportsNoRuntime(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(goTool); serr != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("no go tool in PATH or GOROOT: %v", err)
			}
			t.Skipf("no go tool in PATH or GOROOT (%v): cannot list the dependencies", err)
		}
	}
	cmd := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", "./...")
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list -deps ./...: %v\n%s", err, msg)
	}
	const mod = "github.com/rampart-edge/rampart/"
	seen := 0
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, mod)
		if !ok {
			continue
		}
		seen++
		for _, bad := range runtimePackages {
			if rel == bad || strings.HasPrefix(rel, bad+"/") {
				t.Errorf("the control plane depends on %s (a node runtime package); see 'go list -deps ./control/...'", p)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list named only %d rampart packages; the listing is not what this test expects:\n%s", seen, out)
	}
}
