package agent

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// sockKey names one of the proxy's listening sockets: a snapshot listener
// and a network ("tcp" or "udp").
type sockKey struct{ Listener, Network string }

func (k sockKey) String() string { return k.Listener + "/" + k.Network }

// port is one VIP:port:proto of the snapshot and the socket it goes to.
type port struct {
	Addr  netip.Addr
	Port  uint16
	Proto bpf.Proto
	Sock  sockKey
}

// l4 is the snapshot's L4 section in the agent's terms: what is the same
// whichever sockets the proxy has handed over.
type l4 struct {
	Addrs  []netip.Addr   // VIP addresses, sorted, unique
	Ports  []port         // sorted
	Limits bpf.Limits     // per-source limits and the malformed policy
	Deny   []netip.Prefix // the snapshot's deny_cidrs, masked
}

// translate turns a validated snapshot's L4 section into l4. Every VIP port
// steers TCP when its listener serves http1 or h2 and UDP when it serves h3.
// maxVIPs bounds the entries per family (bpf.Options.MaxVIPs, one more per
// address for its marker); 0 means unbounded.
func translate(c *snapshot.Config, extra bpf.Limits, maxVIPs int) (l4, error) {
	var out l4
	listeners := map[string]snapshot.Listener{}
	for _, ln := range c.Listeners {
		listeners[ln.Name] = ln
	}
	perFamily := map[bool]int{}
	for _, v := range c.L4.VIPs {
		a, err := netip.ParseAddr(v.Address)
		if err != nil {
			return l4{}, fmt.Errorf("l4: VIP %q: %w", v.Address, err)
		}
		a = a.Unmap()
		out.Addrs = append(out.Addrs, a)
		perFamily[a.Is4()]++
		for _, vp := range v.Ports {
			ln, ok := listeners[vp.Listener]
			if !ok {
				return l4{}, fmt.Errorf("l4: VIP %s port %d: unknown listener %q", a, vp.Port, vp.Listener)
			}
			if vp.Port < 1 || vp.Port > 65535 {
				return l4{}, fmt.Errorf("l4: VIP %s: port %d out of range", a, vp.Port)
			}
			tcp, udp := snapshot.ListenerProtocols(ln)
			if tcp {
				out.Ports = append(out.Ports, port{a, uint16(vp.Port), bpf.TCP, sockKey{ln.Name, "tcp"}})
				perFamily[a.Is4()]++
			}
			if udp {
				out.Ports = append(out.Ports, port{a, uint16(vp.Port), bpf.UDP, sockKey{ln.Name, "udp"}})
				perFamily[a.Is4()]++
			}
		}
	}
	if maxVIPs > 0 {
		for is4, n := range perFamily {
			if n > maxVIPs {
				fam := "IPv6"
				if is4 {
					fam = "IPv4"
				}
				return l4{}, fmt.Errorf("l4: %d %s VIP entries (ports and one per address) exceed the map size %d (-max-vips)", n, fam, maxVIPs)
			}
		}
	}
	slices.SortFunc(out.Addrs, netip.Addr.Compare)
	out.Addrs = slices.Compact(out.Addrs)
	slices.SortFunc(out.Ports, comparePort)
	out.Ports = slices.Compact(out.Ports)

	lim := c.L4.Limits
	out.Limits = extra
	out.Limits.PPS, out.Limits.PPSBurst = uint64(max(lim.PacketsPerSecond, 0)), uint64(max(lim.PacketBurst, 0))
	out.Limits.SYNRate, out.Limits.SYNBurst = uint64(max(lim.SYNPerSecond, 0)), uint64(max(lim.SYNBurst, 0))
	out.Limits.MaxConns = uint32(max(lim.MaxConnectionsPerSource, 0))
	if out.Limits.PPS > 0 && out.Limits.PPSBurst == 0 {
		out.Limits.PPSBurst = out.Limits.PPS
	}
	if out.Limits.SYNRate > 0 && out.Limits.SYNBurst == 0 {
		out.Limits.SYNBurst = out.Limits.SYNRate
	}
	if extra.NewSources > 0 && extra.NewSourceBurst == 0 {
		out.Limits.NewSourceBurst = extra.NewSources
	}
	// A burst without a rate means nothing; bpf reads it back as 0.
	for _, b := range []struct{ rate, burst *uint64 }{{&out.Limits.PPS, &out.Limits.PPSBurst},
		{&out.Limits.SYNRate, &out.Limits.SYNBurst}, {&out.Limits.NewSources, &out.Limits.NewSourceBurst}} {
		if *b.rate == 0 {
			*b.burst = 0
		}
	}
	out.Limits.MalformedVIPPass = c.L4.Malformed == "pass"
	out.Limits.MalformedOtherDrop = false // malformed non-VIP frames always pass

	for _, s := range c.L4.DenyCIDRs {
		p, err := parsePrefix(s)
		if err != nil {
			return l4{}, fmt.Errorf("l4: deny_cidrs: %w", err)
		}
		out.Deny = append(out.Deny, p)
	}
	return out, nil
}

func comparePort(x, y port) int {
	return cmp.Or(x.Addr.Compare(y.Addr), cmp.Compare(x.Port, y.Port), cmp.Compare(x.Proto, y.Proto),
		cmp.Compare(x.Sock.Listener, y.Sock.Listener), cmp.Compare(x.Sock.Network, y.Sock.Network))
}

// parsePrefix accepts a prefix or a bare address (a /32 or /128), masked.
func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a prefix or address", s)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// bpfVIPs points every port at its socket's index, or bpf.NoSocket while
// the proxy has not handed that socket over.
func bpfVIPs(ports []port, index func(sockKey) (uint32, bool)) []bpf.VIP {
	out := make([]bpf.VIP, 0, len(ports))
	for _, p := range ports {
		idx, ok := index(p.Sock)
		if !ok {
			idx = bpf.NoSocket
		}
		out = append(out, bpf.VIP{Addr: p.Addr, Port: p.Port, Proto: p.Proto, Socket: idx})
	}
	return out
}

// mergeDeny is the union of prefix lists, sorted (address, then length)
// and without duplicates. Lists already sorted (the deny channel's CIDRs
// are) are merged as they are: a million prefixes take milliseconds, where
// sorting them took ~100 ms.
func mergeDeny(lists ...[]netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, l := range lists {
		if !slices.IsSortedFunc(l, comparePrefix) {
			l = slices.Clone(l)
			slices.SortFunc(l, comparePrefix)
		}
		out = mergeSorted(out, l)
	}
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// mergeSorted merges two sorted lists into a new one, dropping duplicates.
// A short list (the snapshot's) goes into a long one (the channel's) by
// binary search and block copies.
func mergeSorted(a, b []netip.Prefix) []netip.Prefix {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(a) == 0 {
		return b
	}
	if len(a)*64 < len(b) {
		out := make([]netip.Prefix, 0, len(a)+len(b))
		for _, p := range a {
			i, found := slices.BinarySearchFunc(b, p, comparePrefix)
			out, b = append(out, b[:i]...), b[i:]
			if !found && (len(out) == 0 || out[len(out)-1] != p) {
				out = append(out, p)
			}
		}
		return append(out, b...)
	}
	out := make([]netip.Prefix, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var p netip.Prefix
		switch {
		case j == len(b):
			p, i = a[i], i+1
		case i == len(a):
			p, j = b[j], j+1
		default:
			switch c := comparePrefix(a[i], b[j]); {
			case c < 0:
				p, i = a[i], i+1
			case c > 0:
				p, j = b[j], j+1
			default:
				p, i, j = a[i], i+1, j+1
			}
		}
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}
