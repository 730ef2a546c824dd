package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// The base tree for the install test: Debian 12 minbase plus systemd (the
// package's dependency), made once with debootstrap and kept outside the
// repository, keyed by suite, architecture and package list.
const (
	baseCache = "/var/cache/rampart-images"
	baseKey   = "deb-test-bookworm-amd64-minbase-systemd"
)

func baseTree(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(baseCache, baseKey)
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir
	}
	debootstrap := need(t, "debootstrap", "debootstrap")
	if err := os.MkdirAll(baseCache, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return dir // made by another run while this one waited
	}
	mirror := os.Getenv("RAMPART_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dir, os.Getpid())
	_ = os.RemoveAll(tmp)
	t.Logf("debootstrap bookworm into %s (minutes; cached for the next run)", dir)
	runOK(t, debootstrap, "--variant=minbase", "--include=systemd", "--arch=amd64", "bookworm", tmp, mirror)
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// skipped are paths whose changes are dpkg's and the shadow suite's own
// bookkeeping, not something the package leaves: the dpkg database and
// logs, debconf's cache, and the shadow backups (passwd- and friends).
var skipped = []string{"/proc", "/dev", "/sys", "/tmp", "/var/lib/dpkg", "/var/log", "/var/cache/debconf",
	"/etc/passwd-", "/etc/group-", "/etc/shadow-", "/etc/gshadow-", "/etc/.pwd.lock", "/.complete"}

// tree lists every path under root with its type, mode and owner.
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := "/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		for _, s := range skipped {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		out[rel] = fmt.Sprintf("%v %d:%d", info.Mode(), st.Uid, st.Gid)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

func diffTrees(before, after map[string]string) []string {
	var d []string
	for p, a := range after {
		if b, ok := before[p]; !ok {
			d = append(d, "left behind: "+p+" "+a)
		} else if a != b {
			d = append(d, "changed: "+p+" "+b+" → "+a)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			d = append(d, "removed: "+p)
		}
	}
	sort.Strings(d)
	return d
}

// in runs a command inside the chroot.
func in(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{root}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in the chroot: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func statOf(t *testing.T, path string) (os.FileMode, uint32, uint32) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	return info.Mode().Perm(), st.Uid, st.Gid
}

// TestInstallUpgradePurgeInChroot installs the package into a fresh Debian
// 12 tree, checks users, directories, enabled units, `rampart version`,
// config validation and `systemd-analyze verify` of the installed units;
// upgrades it (a local conffile edit survives); purges it and finds the
// tree as it was before.
func TestInstallUpgradePurgeInChroot(t *testing.T) {
	needRoot(t, "chroot, mount and dpkg inside a debootstrap tree")
	need(t, "chroot", "coreutils")
	analyze := need(t, "systemd-analyze", "systemd")
	base := baseTree(t)
	root := filepath.Join(t.TempDir(), "root")
	runOK(t, "cp", "-a", base, root)
	// No /proc in the chroot, as in an image build: the scripts must not need it.
	passwdBefore := in(t, root, "cat", "/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow")
	before := tree(t, root)
	runOK(t, "cp", debPath, filepath.Join(root, "tmp"))

	in(t, root, "dpkg", "-i", "/tmp/"+filepath.Base(debPath))

	for _, user := range []string{"rampart-proxy", "rampart-control"} {
		if line := in(t, root, "getent", "passwd", user); !strings.HasSuffix(strings.TrimSpace(line), ":/nonexistent:/usr/sbin/nologin") {
			t.Errorf("user %s: %q, want a system user without home or shell", user, line)
		}
	}
	id := func(args ...string) uint32 {
		var n uint32
		_, err := fmt.Sscan(in(t, root, append([]string{"id"}, args...)...), &n)
		if err != nil {
			t.Fatalf("id %v: %v", args, err)
		}
		return n
	}
	proxyUID, rampartGID, controlUID, controlGID := id("-u", "rampart-proxy"), id("-g", "rampart-proxy"), id("-u", "rampart-control"), id("-g", "rampart-control")
	for path, want := range map[string][3]uint32{
		"/etc/rampart":               {0o750, 0, rampartGID},
		"/var/lib/rampart":           {0o755, 0, 0},
		"/var/lib/rampart/snapshots": {0o750, proxyUID, rampartGID},
		"/var/lib/rampart/proxy":     {0o750, proxyUID, rampartGID},
		"/var/lib/rampart/agent":     {0o700, 0, 0},
		"/var/lib/rampart/control":   {0o750, controlUID, controlGID},
		"/run/rampart":               {0o750, proxyUID, rampartGID},
	} {
		mode, uid, gid := statOf(t, filepath.Join(root, path))
		if uint32(mode) != want[0] || uid != want[1] || gid != want[2] {
			t.Errorf("%s: %o %d:%d, want %o %d:%d", path, mode, uid, gid, want[0], want[1], want[2])
		}
	}
	for _, u := range []string{"rampart-agent.service", "rampart-proxy.service", "rampart-control.service"} {
		link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants", u)
		if dst, err := os.Readlink(link); err != nil || dst != "/lib/systemd/system/"+u && dst != "/usr/lib/systemd/system/"+u {
			t.Errorf("%s is not enabled: %s → %q (%v)", u, link, dst, err)
		}
	}

	if out := in(t, root, "rampart", "version"); !strings.Contains(out, "version: "+testVersion) || !strings.Contains(out, "commit:  "+testCommit) {
		t.Errorf("rampart version in the chroot:\n%s", out)
	}
	if out, err := exec.Command(analyze, append([]string{"verify", "--root=" + root}, unitNames(t)...)...).CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify --root of the installed units: %v\n%s", err, out)
	}

	// Config validation with the installed binary and example.
	in(t, root, "rampart", "keygen", "-out", "/etc/rampart/snapshot")
	out := in(t, root, "rampart", "snapshot", "build", "-config", "/usr/share/doc/rampart/examples/edge.yaml",
		"-key", "/etc/rampart/snapshot.key", "-out", "/var/lib/rampart/snapshots/1.snap")
	if !strings.Contains(out, "1 routes") {
		t.Errorf("snapshot build of the example: %s", out)
	}
	in(t, root, "rampart", "snapshot", "verify", "-pub", "/etc/rampart/snapshot.pub", "/var/lib/rampart/snapshots/1.snap")
	bad := filepath.Join(root, "tmp", "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: {epoch: 1, sequence: 1}\nroutes:\n  - {id: r, host: \"*\", path_template: /, upstream_cluster: nowhere}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("chroot", root, "rampart", "snapshot", "build", "-config", "/tmp/bad.yaml", "-key", "/etc/rampart/snapshot.key", "-out", "/tmp/bad.snap")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "nowhere") {
		t.Errorf("an invalid config was not refused naming its unknown cluster (%v):\n%s", err, out)
	}

	// Files postinst made for the operator: the defaults, commented out.
	for _, u := range []string{"agent", "proxy", "control"} {
		b, err := os.ReadFile(filepath.Join(root, "etc/rampart", u+".env"))
		if err != nil {
			t.Errorf("postinst did not make /etc/rampart/%s.env: %v", u, err)
			continue
		}
		if !strings.Contains(string(b), "\n#RAMPART_ARGS=") || strings.Contains(string(b), "\nRAMPART_ARGS=") {
			t.Errorf("/etc/rampart/%s.env should hold the defaults commented out:\n%s", u, b)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/rampart-proxy.service.d/limits.conf")); err != nil || !strings.Contains(string(b), "#MemoryMax=4G") {
		t.Errorf("postinst's limits.conf drop-in: %v\n%s", err, b)
	}

	// Upgrade to a package whose defaults changed, after the operator edited
	// agent.env and limits.conf, with no terminal (stdin /dev/null, as
	// unattended-upgrades runs it): no prompt, the edits stay byte for byte,
	// the new defaults are in place; a deleted operator file is made again.
	edits := map[string]string{
		"etc/rampart/agent.env":                                  "RAMPART_ARGS=-interfaces ens3 -keep-vips -handoff-socket /run/rampart/handoff.sock\n",
		"etc/systemd/system/rampart-proxy.service.d/limits.conf": "[Service]\nMemoryMax=8G\nEnvironment=GOMEMLIMIT=7200MiB\n",
	}
	for path, body := range edits {
		if err := os.WriteFile(filepath.Join(root, path), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(root, "etc/rampart/control.env")); err != nil {
		t.Fatal(err)
	}
	upgrade := changedDefaultsDeb(t)
	runOK(t, "cp", upgrade, filepath.Join(root, "tmp"))
	up := exec.Command("chroot", root, "dpkg", "-i", "/tmp/"+filepath.Base(upgrade))
	up.Stdin = nil // /dev/null
	up.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C"}
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("a non-interactive upgrade with changed defaults and edited operator files failed: %v\n%s", err, out)
	}
	if v := in(t, root, "dpkg-query", "-W", "-f", "${Version}", "rampart"); v != testVersion2 {
		t.Errorf("after the upgrade dpkg-query says version %q, want %s", v, testVersion2)
	}
	for path, body := range edits {
		if b, _ := os.ReadFile(filepath.Join(root, path)); string(b) != body {
			t.Errorf("the upgrade changed the operator's /%s:\n%s", path, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "usr/lib/rampart/defaults/proxy.env")); !strings.Contains(string(b), changedDefault) {
		t.Errorf("the upgrade did not install the new defaults:\n%s", b)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/rampart/control.env")); err != nil || !strings.Contains(string(b), "#RAMPART_ARGS=") {
		t.Errorf("the deleted control.env was not made again: %v\n%s", err, b)
	}
	if id("-u", "rampart-proxy") != proxyUID {
		t.Error("the upgrade changed rampart-proxy's uid")
	}

	in(t, root, "dpkg", "--purge", "rampart")
	in(t, root, "rm", "-f", "/tmp/"+filepath.Base(debPath), "/tmp/"+filepath.Base(upgrade))
	if d := diffTrees(before, tree(t, root)); len(d) > 0 {
		t.Errorf("dpkg --purge left the tree different from before the install:\n%s", strings.Join(d, "\n"))
	}
	if after := in(t, root, "cat", "/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"); after != passwdBefore {
		t.Errorf("users or groups left after the purge:\nbefore:\n%s\nafter:\n%s", passwdBefore, after)
	}
}

// changedDefault is the proxy default that changedDefaultsDeb's package adds.
const changedDefault = "RAMPART_ARGS=-handoff-socket /run/rampart/handoff.sock -access-log stdout -poll 500ms"

// changedDefaultsDeb builds version testVersion2 from a copy of the
// repository's images/ whose package defaults differ (proxy.env's
// RAMPART_ARGS, a line of the limits template), as a release that changes
// a default would.
func changedDefaultsDeb(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	runOK(t, "cp", "-a", filepath.Join(repoRoot, "images"), filepath.Join(root, "images"))
	runOK(t, "cp", filepath.Join(repoRoot, "README.md"), root)
	for name, edit := range map[string][2]string{
		"proxy.env":         {"RAMPART_ARGS=-handoff-socket /run/rampart/handoff.sock -access-log stdout", changedDefault},
		"proxy-limits.conf": {"#LimitNOFILE=1048576", "#LimitNOFILE=2097152"},
	} {
		path := filepath.Join(root, "images/etc/defaults", name)
		b, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(b), edit[0]+"\n") {
			t.Fatalf("%s lacks the line %q to change (%v)", path, edit[0], err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(b), edit[0]+"\n", edit[1]+"\n", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, _, err := build(options{Root: root, Binary: rampartBin, Version: testVersion2, Arch: "amd64", OutDir: t.TempDir()})
	if err != nil {
		t.Fatalf("build the package with changed defaults: %v", err)
	}
	return p
}
