package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// A listener with port 0 and HTTP/3 binds TCP first (the kernel picks the
// port) and then UDP on the same number, which another UDP socket may
// hold. In a network namespace whose ephemeral range is two ports, with
// UDP taken on the odd one (which the kernel's bind(0) prefers, so it
// picks it first every time), the listener must still come up on the
// other, every time.
func TestPortZeroH3FindsAPortFreeForBoth(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root: a network namespace with its own port range is needed")
		}
		t.Skip("needs root: a network namespace with its own ephemeral port range")
	}
	errc := make(chan error, 1)
	go func() {
		// Every socket of this test lives on this thread's namespace; the
		// thread is never unlocked, so it dies with the goroutine.
		runtime.LockOSThread()
		errc <- portZeroInNamespace(t)
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("liveness: the port-0 binds never finished")
	}
}

func portZeroInNamespace(t *testing.T) error {
	ns, err := netns.New() // also moves this thread into it
	if err != nil {
		return fmt.Errorf("new netns: %w", err)
	}
	defer ns.Close()
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	// /proc/sys/net is the opener's namespace.
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("40000 40001"), 0o644); err != nil {
		return err
	}
	held, err := net.ListenPacket("udp", "127.0.0.1:40001") // bind(0) prefers odd ports
	if err != nil {
		return err
	}
	defer held.Close()
	for i := 0; i < 8; i++ {
		l := newLab(t)
		c := l.h3Config()
		c.Listeners = c.Listeners[:1]
		if err := l.p.Apply(l.snap(c)); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		a, ok := l.p.ListenerAddr("https")
		if !ok || a.(*net.TCPAddr).Port != 40000 {
			return fmt.Errorf("round %d: listener on %v, want port 40000 (the one free for TCP and UDP)", i, a)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := l.p.Shutdown(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("round %d: shutdown: %w", i, err)
		}
	}
	return nil
}
