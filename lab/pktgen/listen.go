package pktgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Listener receives the frames coming in on an interface (not those it
// sends) through an AF_PACKET socket.
type Listener struct {
	fd  int
	buf []byte
}

// Listen opens a Listener on iface in the namespace at netns ("": the
// caller's), with a receive buffer of 32 MiB.
func Listen(netns, iface string) (*Listener, error) {
	var l *Listener
	err := inNetNS(netns, func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return fmt.Errorf("pktgen: listen on %s: %w", iface, err)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("pktgen: AF_PACKET socket (needs CAP_NET_RAW): %w", err)
		}
		for _, o := range []struct{ level, opt, v int }{
			{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32 << 20},
			{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1},
		} {
			if err := unix.SetsockoptInt(fd, o.level, o.opt, o.v); err != nil {
				unix.Close(fd)
				return fmt.Errorf("pktgen: listen on %s: socket option %d: %w", iface, o.opt, err)
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifc.Index, Protocol: htons(unix.ETH_P_ALL)}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("pktgen: listen on %s: bind: %w", iface, err)
		}
		l = &Listener{fd: fd, buf: make([]byte, 65536)}
		return nil
	})
	return l, err
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Next waits up to wait for the next frame and returns it (valid until
// the next call); ok is false when none came in time.
func (l *Listener) Next(wait time.Duration) (frame []byte, ok bool, err error) {
	deadline := time.Now().Add(wait)
	for {
		n, _, err := unix.Recvfrom(l.fd, l.buf, unix.MSG_DONTWAIT)
		if err == nil {
			return l.buf[:n], true, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return nil, false, fmt.Errorf("pktgen: receive: %w", err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, false, nil
		}
		ms := int(min(left, 100*time.Millisecond)/time.Millisecond) + 1
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}, ms); err != nil && !errors.Is(err, unix.EINTR) {
			return nil, false, fmt.Errorf("pktgen: poll: %w", err)
		}
	}
}

// Drops is how many frames the socket dropped (buffer full) since the
// last call.
func (l *Listener) Drops() (uint64, error) {
	var st unix.TpacketStats
	sz := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(l.fd), unix.SOL_PACKET, unix.PACKET_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&sz)), 0); e != 0 {
		return 0, fmt.Errorf("pktgen: PACKET_STATISTICS: %w", e)
	}
	return uint64(st.Drops), nil
}

// Close closes the socket.
func (l *Listener) Close() error { return unix.Close(l.fd) }

// Hop is where frames to an address leave a namespace: the interface and
// the link-layer address of the next hop.
type Hop struct {
	Iface string
	MAC   net.HardwareAddr
}

// NextHop finds, in the namespace at netns ("": the caller's), the
// interface the route to addr leaves by and the next hop's link-layer
// address (resolving it if needed, up to 5 s). Frames sent on Iface to
// MAC with any destination address go where the route to addr goes: to
// send straight to one of several equal-cost neighbours, pass that
// neighbour's own (link) address.
func NextHop(netns string, addr netip.Addr) (Hop, error) {
	var h Hop
	err := inNetNS(netns, func() error {
		nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("pktgen: netlink: %w", err)
		}
		defer nl.Close()
		routes, err := nl.RouteGet(addr.AsSlice())
		if err != nil || len(routes) == 0 {
			return fmt.Errorf("pktgen: no route to %v: %v", addr, err)
		}
		ifc, err := net.InterfaceByIndex(routes[0].LinkIndex)
		if err != nil {
			return fmt.Errorf("pktgen: the route to %v: interface %d: %w", addr, routes[0].LinkIndex, err)
		}
		h.Iface = ifc.Name
		h.MAC, err = resolveNextHop(context.Background(), ifc, addr)
		return err
	})
	return h, err
}
