package agent

import (
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rampart-edge/rampart/bpf/netnstest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inNetns runs f on a locked thread inside a new network namespace, and
// returns to the original one after.
func inNetns(t *testing.T, f func()) {
	t.Helper()
	netnstest.NeedRoot(t, "network namespaces")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		netns.Set(orig)
		ns.Close()
	}()
	f()
}

// nl is a netlink handle for the current thread's namespace (the package
// functions may reuse a socket of another namespace).
func nl(t *testing.T) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func addrsOf(t *testing.T, name string) map[netip.Prefix]bool {
	t.Helper()
	h := nl(t)
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[netip.Prefix]bool{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		as, _ := h.AddrList(l, fam)
		for _, a := range as {
			if p, ok := netipPrefix(a.IPNet); ok && !p.Addr().IsLinkLocalUnicast() {
				out[p] = true
			}
		}
	}
	return out
}

func TestVIPsAddRemoveOnlyOwn(t *testing.T) {
	inNetns(t, func() {
		v := &VIPs{Iface: "rvip0"}
		a4, a6 := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("2001:db8::10")
		if err := v.Sync([]netip.Addr{a4, a6}); err != nil {
			t.Fatal(err)
		}
		got := addrsOf(t, "rvip0")
		if !got[netip.MustParsePrefix("203.0.113.10/32")] || !got[netip.MustParsePrefix("2001:db8::10/128")] {
			t.Fatalf("addresses %v", got)
		}
		keep, _ := os.ReadFile("/proc/sys/net/ipv6/conf/rvip0/keep_addr_on_down")
		if string(keep) != "1\n" {
			t.Errorf("keep_addr_on_down = %q", keep)
		}
		// An operator's address on the same interface is never touched.
		h := nl(t)
		l, _ := h.LinkByName("rvip0")
		op := &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("198.51.100.7/32"))}
		if err := h.AddrAdd(l, op); err != nil {
			t.Fatal(err)
		}
		if err := v.Sync([]netip.Addr{a6}); err != nil {
			t.Fatal(err)
		}
		got = addrsOf(t, "rvip0")
		if got[netip.MustParsePrefix("203.0.113.10/32")] || !got[netip.MustParsePrefix("198.51.100.7/32")] || !got[netip.MustParsePrefix("2001:db8::10/128")] {
			t.Fatalf("after removing a4: %v", got)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.LinkByName("rvip0"); err == nil {
			t.Fatal("the interface the agent created is still there")
		}
	})
}

func TestVIPsOnExistingInterfaceStays(t *testing.T) {
	inNetns(t, func() {
		h := nl(t)
		if err := h.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: "ops0"}}); err != nil { // the kernel here has no dummy driver
			t.Fatal(err)
		}
		v := &VIPs{Iface: "ops0"}
		if err := v.Sync([]netip.Addr{netip.MustParseAddr("192.0.2.1")}); err != nil {
			t.Fatal(err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := h.LinkByName("ops0"); err != nil {
			t.Fatal("an interface the agent did not create was deleted")
		}
		if got := addrsOf(t, "ops0"); len(got) != 0 {
			t.Fatalf("left behind: %v", got)
		}
	})
}

func TestVIPsRememberedAcrossRestarts(t *testing.T) {
	inNetns(t, func() {
		state := filepath.Join(t.TempDir(), "vips.json")
		a4, b4 := netip.MustParseAddr("203.0.113.10"), netip.MustParseAddr("203.0.113.11")
		first := &VIPs{Iface: "rvip1", StateFile: state}
		if err := first.Sync([]netip.Addr{a4, b4}); err != nil {
			t.Fatal(err)
		}
		first.Release() // -keep-vips: the addresses stay
		if got := addrsOf(t, "rvip1"); len(got) != 2 {
			t.Fatalf("after release: %v", got)
		}
		// The next agent knows what the first one added and created.
		second := &VIPs{Iface: "rvip1", StateFile: state}
		if err := second.Sync([]netip.Addr{a4}); err != nil {
			t.Fatal(err)
		}
		if got := addrsOf(t, "rvip1"); len(got) != 1 || !got[netip.MustParsePrefix("203.0.113.10/32")] {
			t.Fatalf("a VIP the first agent added was not removed: %v", got)
		}
		second.Release()
		// Teardown from another namespace finds no interface and forgets nothing.
		var other error
		inNetns(t, func() { other = (&VIPs{Iface: "rvip1", StateFile: state}).Close() })
		if other != nil {
			t.Fatal(other)
		}
		if err := (&VIPs{Iface: "rvip1", StateFile: state}).Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := nl(t).LinkByName("rvip1"); err == nil {
			t.Fatal("the interface the first agent created survived the teardown")
		}
	})
}
