package lab

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on an OS thread switched into the network namespace bound
// at path; sockets fn creates live in that namespace for good.
func inNetns(path string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open this thread's namespace: %w", err)
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", path, err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it ends with its goroutine and the
			// runtime does not reuse it.
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}

// dialer dials TCP from a namespace, optionally from a source address.
type dialer struct {
	netns   string
	src     net.IP
	timeout time.Duration
}

func (d dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(d.netns, func() error {
		nd := net.Dialer{Timeout: d.timeout}
		nd.SetMultipathTCP(false)
		if d.src != nil {
			nd.LocalAddr = &net.TCPAddr{IP: d.src}
		}
		var err error
		c, err = nd.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// HTTPClient is an HTTP client whose connections are made in the network
// namespace bound at netns, from src when it is not empty. Every request
// gets a new connection (a new source port: ECMP hashes it afresh).
func HTTPClient(netns, src string, timeout time.Duration) *http.Client {
	d := dialer{netns: netns, timeout: timeout}
	if src != "" {
		d.src = net.ParseIP(src)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: d.DialContext, DisableKeepAlives: true, Proxy: nil}}
}
