package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// entry is one line of `dpkg-deb -c`.
type entry struct{ mode, owner string }

func contents(t *testing.T, deb string) map[string]entry {
	t.Helper()
	out := runOK(t, need(t, "dpkg-deb", "dpkg"), "-c", deb)
	got := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb -c line %q has fewer than 6 fields", line)
		}
		got[strings.TrimPrefix(f[len(f)-1], ".")] = entry{f[0], f[1]}
	}
	return got
}

func TestPackageContents(t *testing.T) {
	got := contents(t, debPath)
	want := map[string]string{
		"/usr/bin/rampart":                             "-rwxr-xr-x",
		"/usr/lib/rampart/defaults/agent.env":          "-rw-r--r--",
		"/usr/lib/rampart/defaults/proxy.env":          "-rw-r--r--",
		"/usr/lib/rampart/defaults/control.env":        "-rw-r--r--",
		"/usr/lib/rampart/defaults/proxy-limits.conf":  "-rw-r--r--",
		"/usr/lib/sysctl.d/60-rampart.conf":            "-rw-r--r--",
		"/usr/lib/tmpfiles.d/rampart.conf":             "-rw-r--r--",
		"/usr/share/doc/rampart/README.md":             "-rw-r--r--",
		"/usr/share/doc/rampart/examples/edge.yaml":    "-rw-r--r--",
		"/usr/share/doc/rampart/examples/control.yaml": "-rw-r--r--",
	}
	for _, u := range unitNames(t) {
		want["/usr/lib/systemd/system/"+u] = "-rw-r--r--"
	}
	for path, mode := range want {
		e, ok := got[path]
		if !ok {
			t.Errorf("%s is not in the package", path)
			continue
		}
		if e.mode != mode || e.owner != "root/root" {
			t.Errorf("%s: %s %s, want %s root/root", path, e.mode, e.owner, mode)
		}
	}
	for path, e := range got {
		if strings.HasSuffix(path, "/") {
			if e.mode != "drwxr-xr-x" || e.owner != "root/root" {
				t.Errorf("directory %s: %s %s, want drwxr-xr-x root/root", path, e.mode, e.owner)
			}
			continue
		}
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected file in the package: %s", path)
		}
	}
	if len(got) == 0 {
		t.Fatal("the package lists no files")
	}
}

func TestPackageControl(t *testing.T) {
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	for field, want := range map[string]string{
		"Package":      "rampart",
		"Version":      testVersion,
		"Architecture": "amd64",
		"Depends":      "systemd (>= 247), passwd",
	} {
		if got := strings.TrimSpace(runOK(t, dpkgDeb, "-f", debPath, field)); got != want {
			t.Errorf("control field %s = %q, want %q", field, got, want)
		}
	}
	dir := t.TempDir()
	runOK(t, dpkgDeb, "-e", debPath, dir)
	// No conffiles: the defaults live under /usr/lib, the operator's files under
	// /etc are postinst's (made when missing, never replaced), so no upgrade asks.
	if conf, err := os.ReadFile(filepath.Join(dir, "conffiles")); err == nil && len(strings.Fields(string(conf))) > 0 {
		t.Errorf("the package has conffiles %q; an upgrade could stop at a prompt", conf)
	} else if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for path := range contents(t, debPath) {
		if strings.HasPrefix(path, "/etc/") && !strings.HasSuffix(path, "/") {
			t.Errorf("%s is shipped under /etc; defaults belong under /usr/lib", path)
		}
	}
	units := strings.Join(unitNames(t), " ")
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		path := filepath.Join(dir, script)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatalf("maintainer script %s: %v", script, err)
		}
		if st.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v, want 0755", script, st.Mode().Perm())
		}
		body, _ := os.ReadFile(path)
		if strings.Contains(string(body), "@UNITS@") || !strings.Contains(string(body), `units="`+units+`"`) {
			t.Errorf("%s does not list the units %q", script, units)
		}
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", script, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "preinst")); err == nil {
		t.Error("the package has a preinst; nothing needs one")
	}
}

func TestPackageRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		o    options
		want string
	}{
		{"no binary", options{Root: repoRoot, Version: "1.0", Arch: "amd64"}, "no binary"},
		{"missing binary", options{Root: repoRoot, Binary: filepath.Join(dir, "nope"), Version: "1.0", Arch: "amd64"}, "nope"},
		{"version with a hyphen", options{Root: repoRoot, Binary: rampartBin, Version: "1.0-3", Arch: "amd64"}, `"1.0-3"`},
		{"version starting with v", options{Root: repoRoot, Binary: rampartBin, Version: "v1.0", Arch: "amd64"}, `"v1.0"`},
		{"no units", options{Root: dir, Binary: rampartBin, Version: "1.0", Arch: "amd64"}, "no unit files"},
	} {
		_, err := info(c.o, dir)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: info() = %v, want an error naming %s", c.name, err, c.want)
		}
	}
}

// TestPackageReproducible: one binary and version give byte-identical packages.
func TestPackageReproducible(t *testing.T) {
	a, _, err := build(options{Root: repoRoot, Binary: rampartBin, Version: testVersion, Arch: "amd64", OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(debPath)
	if len(x) == 0 || string(x) != string(y) {
		t.Fatalf("two builds of %s differ (%d and %d bytes)", testVersion, len(x), len(y))
	}
}

var exposure = regexp.MustCompile(`Overall exposure level for (\S+): ([0-9.]+)`)

// TestSecurityScores runs `systemd-analyze security --offline` on the units
// as the package installs them (drop-ins included) and holds each to a
// ceiling; the scores are logged as FIGURE lines for the README.
func TestSecurityScores(t *testing.T) {
	analyze := need(t, "systemd-analyze", "systemd")
	root := t.TempDir()
	runOK(t, need(t, "dpkg-deb", "dpkg"), "-x", debPath, root)
	ceiling := map[string]float64{"rampart-agent.service": 3.0, "rampart-proxy.service": 2.0, "rampart-control.service": 1.5}
	for unit, max := range ceiling {
		out, _ := exec.Command(analyze, "security", "--offline=yes", "--root="+root, unit).CombinedOutput()
		m := exposure.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("systemd-analyze security %s printed no overall exposure:\n%s", unit, out)
		}
		score, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("%s: exposure %q: %v", unit, m[2], err)
		}
		t.Logf("FIGURE systemd-analyze security --offline=yes %s: %.1f (ceiling %.1f)", unit, score, max)
		if score > max {
			t.Errorf("%s: exposure %.1f above its ceiling %.1f:\n%s", unit, score, max, out)
		}
	}
}
