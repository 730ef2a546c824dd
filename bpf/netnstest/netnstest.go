// Package netnstest gives tests named network namespaces, a way to run code
// inside one, and a private bpffs. The bpf and agent tests share it.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// NeedRoot skips the test when not run as root, naming what is missing
// (what), except in CI, where every test runs as root and a missing
// privilege is a failure.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("needs root (%s); CI runs as root", what)
	}
	t.Skip("needs root: " + what)
}

// Run runs a command and returns its combined output; the test fails if
// the command does.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var seq atomic.Int32

// Next returns a number no other call in this process returns, for unique
// interface names.
func Next() int32 { return seq.Add(1) }

// NS is a named network namespace (ip netns add), bound at Path.
type NS struct{ Name, Path string }

// New creates a named network namespace with lo up and deletes it when the
// test ends. prefix tells apart the namespaces of different packages.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	n := &NS{Name: fmt.Sprintf("%s%d-%d", prefix, os.Getpid(), Next())}
	n.Path = "/run/netns/" + n.Name
	Run(t, "ip", "netns", "add", n.Name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.Name).Run() })
	n.IP(t, "link", "set", "lo", "up")
	return n
}

// IP runs ip -n <namespace> args.
func (n *NS) IP(t testing.TB, args ...string) {
	t.Helper()
	Run(t, append([]string{"ip", "-n", n.Name}, args...)...)
}

// Do runs fn on a thread switched into the namespace; sockets created in
// fn live there.
func (n *NS) Do(t testing.TB, fn func()) {
	t.Helper()
	Enter(t, n.Path, fn)
}

// Enter runs fn on a thread switched into the namespace bound at path.
func Enter(t testing.TB, path string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("setns %s: %v", path, err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(err) // leave the thread locked: it dies with the goroutine
		}
		runtime.UnlockOSThread()
	}()
	fn()
}

// PinRoot mounts a private bpffs for the test's pins, unmounts it when the
// test ends, and returns a pin directory inside it.
func PinRoot(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mount bpffs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return filepath.Join(dir, "rampart")
}
