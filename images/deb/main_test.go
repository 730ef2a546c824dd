package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The rampart binary and the package are built once for every test.
var (
	repoRoot   string // the rampart repository
	rampartBin string // built like `make deb` builds it
	debPath    string // the package, version testVersion
	debPath2   string // the same contents as testVersion2, for the upgrade
	buildDir   string
)

const (
	testVersion  = "0.0.0~test1"
	testVersion2 = "0.0.0~test2"
	testCommit   = "0123456789abcdef0123456789abcdef01234567"
)

func TestMain(m *testing.M) {
	code, err := setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if code < 0 {
		code = m.Run()
	}
	_ = os.RemoveAll(buildDir)
	os.Exit(code)
}

func setup() (int, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return 1, err
	}
	repoRoot = root
	buildDir, err = os.MkdirTemp("", "rampart-debtest-")
	if err != nil {
		return 1, err
	}
	rampartBin = filepath.Join(buildDir, "rampart")
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+testVersion+" -X main.commit="+testCommit,
		"-o", rampartBin, "./cmd/rampart")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 1, fmt.Errorf("build rampart: %w\n%s", err, out)
	}
	for _, v := range []struct {
		version string
		path    *string
	}{{testVersion, &debPath}, {testVersion2, &debPath2}} {
		p, _, err := build(options{Root: repoRoot, Binary: rampartBin, Version: v.version, Arch: "amd64", OutDir: buildDir})
		if err != nil {
			return 1, fmt.Errorf("build package %s: %w", v.version, err)
		}
		*v.path = p
	}
	return -1, nil
}

// need skips the test outside CI when a tool is missing (failing in CI),
// naming it and the Debian package that has it.
func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (Debian package %s) is needed: %v (hack/deps.sh images installs it)", tool, pkg, err)
	}
	t.Skipf("%s (Debian package %s) is missing: %v (hack/deps.sh images installs it)", tool, pkg, err)
	return ""
}

// needRoot skips the test outside CI unless it runs as root.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("root is needed: %s", why)
	}
	t.Skipf("root is needed: %s", why)
}

// runOK runs a command and fails the test with its output if it fails.
func runOK(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// unitNames are the unit files of images/systemd/.
func unitNames(t *testing.T) []string {
	t.Helper()
	files, err := units(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	return names
}
