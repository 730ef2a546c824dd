package pktgen

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resolveNextHop finds the link-layer address frames to dst must carry on
// ifc: the neighbour entry of the route's gateway (or of dst when it is
// on link). Without one it sends the next hop a UDP datagram (port 9,
// discard) so the kernel resolves it, and waits up to 5 s. It runs in the
// namespace of ifc.
func resolveNextHop(ctx context.Context, ifc *net.Interface, dst netip.Addr) (net.HardwareAddr, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("pktgen: netlink: %w", err)
	}
	defer h.Close()
	routes, err := h.RouteGet(dst.AsSlice())
	if err != nil || len(routes) == 0 {
		return nil, fmt.Errorf("pktgen: no route to %v (give -dst-mac): %v", dst, err)
	}
	rt := routes[0]
	if rt.LinkIndex != ifc.Index {
		return nil, fmt.Errorf("pktgen: the route to %v leaves by interface %d, not %s (%d); give -dst-mac", dst, rt.LinkIndex, ifc.Name, ifc.Index)
	}
	hop := dst
	if rt.Gw != nil {
		hop, _ = netip.AddrFromSlice(rt.Gw)
		hop = hop.Unmap()
	}
	family := netlink.FAMILY_V4
	if hop.Is6() {
		family = netlink.FAMILY_V6
	}
	lookup := func() net.HardwareAddr {
		ns, err := h.NeighList(ifc.Index, family)
		if err != nil {
			return nil
		}
		for _, n := range ns {
			a, _ := netip.AddrFromSlice(n.IP)
			if a.Unmap() == hop && len(n.HardwareAddr) == 6 &&
				n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE|netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0 {
				return n.HardwareAddr
			}
		}
		return nil
	}
	if mac := lookup(); mac != nil {
		return mac, nil
	}
	poke(hop, ifc)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if mac := lookup(); mac != nil {
			return mac, nil
		}
	}
	return nil, fmt.Errorf("pktgen: next hop %v to %v on %s did not resolve in 5 s (give -dst-mac)", hop, dst, ifc.Name)
}

// poke sends one UDP datagram to hop's discard port so the kernel
// resolves its link-layer address.
func poke(hop netip.Addr, ifc *net.Interface) {
	zone := ""
	if hop.Is6() && hop.IsLinkLocalUnicast() {
		zone = ifc.Name
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(hop.WithZone(zone), 9)))
	if err != nil {
		return
	}
	c.Write([]byte("rampart pktgen: resolving the next hop"))
	c.Close()
}
