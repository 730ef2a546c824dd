package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/rampart-edge/rampart/format/envelope"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// VIPs puts service addresses on a dummy interface (created when missing), so the kernel treats
// them as local and sk_lookup can steer their traffic to the proxy. It
// removes only what it added: addresses an operator put there by hand stay.
// With StateFile set, what it added is remembered across restarts, so an
// agent stopped with its VIPs kept (or `rampart agent teardown`) still knows
// which addresses and which interface are its own.
type VIPs struct {
	Iface string // default "rampart0"
	// Kind is the link type the agent created ("dummy", or "ifb"/"bridge"
	// on a kernel without dummy devices); empty when the interface existed.
	Kind      string
	StateFile string // where added addresses are remembered ("" : nowhere)

	mu      sync.Mutex
	loaded  bool
	created bool                  // the agent created the interface
	added   map[netip.Prefix]bool // addresses the agent added
	handle  *netlink.Handle
}

type vipState struct {
	Iface   string         `json:"iface"`
	Kind    string         `json:"kind,omitempty"`
	Created bool           `json:"created"`
	Added   []netip.Prefix `json:"added"`
}

// load reads StateFile once; callers hold mu. A state of another interface
// is ignored.
func (v *VIPs) load() {
	if v.loaded {
		return
	}
	v.loaded = true
	if v.added == nil {
		v.added = map[netip.Prefix]bool{}
	}
	if v.StateFile == "" {
		return
	}
	data, err := os.ReadFile(v.StateFile)
	var st vipState
	if err != nil || json.Unmarshal(data, &st) != nil || st.Iface != v.name() {
		return
	}
	for _, p := range st.Added {
		v.added[p] = true
	}
	if st.Created {
		v.created, v.Kind = true, st.Kind
	}
}

// save writes StateFile; callers hold mu.
func (v *VIPs) save() error {
	if v.StateFile == "" {
		return nil
	}
	st := vipState{Iface: v.name(), Kind: v.Kind, Created: v.created, Added: v.addedList()}
	data, _ := json.Marshal(st)
	if err := envelope.WriteFileAtomic(v.StateFile, data, 0o600); err != nil {
		return fmt.Errorf("remember VIPs: %w", err)
	}
	return nil
}

func (v *VIPs) addedList() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(v.added))
	for p := range v.added {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

func (v *VIPs) kind() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.Kind
}

// Added lists the addresses the agent put on the interface.
func (v *VIPs) Added() []netip.Prefix {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.load()
	return v.addedList()
}

func (v *VIPs) name() string {
	if v.Iface == "" {
		return "rampart0"
	}
	return v.Iface
}

// link finds the interface, creating it when create is set; without create a
// missing interface is (nil, nil).
func (v *VIPs) link(create bool) (netlink.Link, error) {
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
	if !create {
		return nil, nil
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
	_ = v.save() // best effort now; every Sync saves again
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
	v.load()
	l, err := v.link(len(want) > 0)
	if err != nil {
		return err
	}
	if l == nil { // nothing wanted and no interface here: nothing to remove
		return nil // (the state is kept: this may be another network namespace)
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
	errs = append(errs, v.save())
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
	if v.created && v.handle != nil {
		if l, err := v.handle.LinkByName(v.name()); err == nil {
			if err := v.handle.LinkDel(l); err != nil {
				return fmt.Errorf("delete %s: %w", v.name(), err)
			}
			v.created = false
			if err := v.save(); err != nil {
				return err
			}
		}
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

// Release closes the netlink handle and leaves every address in place, for
// a quick restart: the next agent finds what it owns in StateFile.
func (v *VIPs) Release() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.handle != nil {
		v.handle.Close()
		v.handle = nil
	}
}
