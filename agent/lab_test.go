package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Helpers for the network-namespace tests (after bpf/netns_test.go).

var nsSeq atomic.Int32

type namedNS struct{ name, path string }

// newNetns creates a named network namespace with lo up and deletes it when
// the test ends.
func newNetns(t testing.TB) *namedNS {
	t.Helper()
	n := &namedNS{name: fmt.Sprintf("ra%d-%d", os.Getpid(), nsSeq.Add(1))}
	n.path = "/run/netns/" + n.name
	sh(t, "ip", "netns", "add", n.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.name).Run() })
	n.ip(t, "link", "set", "lo", "up")
	return n
}

func sh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (n *namedNS) ip(t testing.TB, args ...string) {
	t.Helper()
	sh(t, append([]string{"ip", "-n", n.name}, args...)...)
}

// inNS runs fn on a thread switched into the namespace at path; sockets
// created in fn live there.
func inNS(t testing.TB, path string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
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

// bpffs mounts a private bpffs for the test's pins and unmounts it after.
func bpffs(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mount bpffs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return filepath.Join(dir, "rampart")
}

// client makes HTTP requests from a source address in a namespace; each
// request on a new connection.
func client(t testing.TB, nsPath, src string, timeout time.Duration) *http.Client {
	d := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		inNS(t, nsPath, func() {
			dl := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			c, err = dl.DialContext(ctx, network, addr)
		})
		return c, err
	}
	return &http.Client{Timeout: 2 * timeout, Transport: &http.Transport{DialContext: d, DisableKeepAlives: true, Proxy: nil}}
}

// get returns the status and body of a GET, or an error.
func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func waitFor(t testing.TB, timeout time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}
