package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VIPs puts service addresses on a dummy interface (created when missing), so the kernel treats
// them as local and sk_lookup can steer their traffic to the proxy. It
// removes only what it added: addresses an operator put there by hand stay.
type VIPs struct {
	Iface string // default "rampart0"
	// Kind is the link type the agent created ("dummy", or "ifb"/"bridge"
	// on a kernel without dummy devices); empty when the interface existed.
	Kind string

	mu      sync.Mutex
	created bool                  // the agent created the interface
	added   map[netip.Prefix]bool // addresses the agent added
	handle  *netlink.Handle
}

func (v *VIPs) name() string {
	if v.Iface == "" {
		return "rampart0"
	}
	return v.Iface
}

func (v *VIPs) link() (netlink.Link, error) {
	if v.handle == nil {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		v.handle = h
	}
	l, err := v.handle.LinkByName(v.name())
	if err == nil {
		return l, nil
	}
	var nf netlink.LinkNotFoundError
	if !errors.As(err, &nf) {
		return nil, fmt.Errorf("find %s: %w", v.name(), err)
	}
	// A dummy device when the kernel has one; a kernel built without
	// CONFIG_DUMMY gets an ifb device, which behaves the same for local
	// addresses (no ARP, always up), and failing that a bridge without ports.
	attrs := netlink.LinkAttrs{Name: v.name()}
	var lastErr error
	for _, d := range []netlink.Link{&netlink.Dummy{LinkAttrs: attrs}, &netlink.Ifb{LinkAttrs: attrs}, &netlink.Bridge{LinkAttrs: attrs}} {
		if lastErr = v.handle.LinkAdd(d); lastErr == nil {
			v.Kind = d.Type()
			break
		}
		if !errors.Is(lastErr, unix.EOPNOTSUPP) {
			break
		}
	}
	if lastErr != nil {
		return nil, fmt.Errorf("create interface %s (dummy, ifb or bridge): %w", v.name(), lastErr)
	}
	v.created = true
	// IPv6 addresses are dropped when the device goes down unless
	// keep_addr_on_down is set; set it before the device carries any.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+v.name()+"/keep_addr_on_down", []byte("1"), 0o644)
	l, err = v.handle.LinkByName(v.name())
	if err != nil {
		return nil, fmt.Errorf("find %s after creating it: %w", v.name(), err)
	}
	if err := v.handle.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("bring %s up: %w", v.name(), err)
	}
	return l, nil
}

// Sync makes the interface carry exactly the wanted VIPs among those the
// agent manages: missing ones are added (as /32 or /128), ones it added
// earlier and no longer wanted are removed.
func (v *VIPs) Sync(want []netip.Addr) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.added == nil {
		v.added = map[netip.Prefix]bool{}
	}
	l, err := v.link()
	if err != nil {
		return err
	}
	have := map[netip.Prefix]bool{}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := v.handle.AddrList(l, fam)
		if err != nil {
			return fmt.Errorf("list addresses of %s: %w", v.name(), err)
		}
		for _, a := range addrs {
			if p, ok := netipPrefix(a.IPNet); ok {
				have[p] = true
			}
		}
	}
	wanted := map[netip.Prefix]bool{}
	var errs []error
	for _, a := range want {
		a = a.Unmap()
		p := netip.PrefixFrom(a, a.BitLen())
		wanted[p] = true
		if have[p] {
			continue
		}
		addr := &netlink.Addr{IPNet: ipNet(p)}
		if a.Is6() {
			addr.Flags = unix.IFA_F_NODAD // a VIP is ours at once
		}
		if err := v.handle.AddrAdd(l, addr); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("add %s to %s: %w", p, v.name(), err))
			continue
		}
		v.added[p] = true
	}
	for p := range v.added {
		if wanted[p] {
			continue
		}
		if err := v.handle.AddrDel(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			errs = append(errs, fmt.Errorf("remove %s from %s: %w", p, v.name(), err))
			continue
		}
		delete(v.added, p)
	}
	return errors.Join(errs...)
}

// Close removes the addresses the agent added, and the interface if the
// agent created it.
func (v *VIPs) Close() error {
	if err := v.Sync(nil); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.created {
		if l, err := v.handle.LinkByName(v.name()); err == nil {
			if err := v.handle.LinkDel(l); err != nil {
				return fmt.Errorf("delete %s: %w", v.name(), err)
			}
		}
		v.created = false
	}
	if v.handle != nil {
		v.handle.Close()
		v.handle = nil
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}
