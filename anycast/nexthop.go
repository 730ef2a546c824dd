package anycast

import (
	"net/netip"
	"sort"
)

// nextHopSelf is what the status shows for a next hop of "the session's
// local address" while no session of its family is established.
const nextHopSelf = "self"

// resolveNextHop returns a copy of a whose unspecified next hop (0.0.0.0
// or ::, which GoBGP replaces with each session's local address) is the
// address the peers see: the local address of the established sessions of
// the same family. When they differ, NextHop is "self" and NextHopByPeer
// lists each one.
func resolveNextHop(a *Attributes, sessions []SessionStatus) *Attributes {
	if a == nil {
		return nil
	}
	nh, err := netip.ParseAddr(a.NextHop)
	if err != nil || !nh.IsUnspecified() {
		return a
	}
	out := *a
	byPeer := map[string]string{}
	var addrs []string
	for _, s := range sessions {
		la, err := netip.ParseAddr(s.LocalAddress)
		if s.State != "established" || err != nil || la.IsUnspecified() || la.Unmap().Is4() != nh.Is4() {
			continue
		}
		byPeer[s.Peer] = la.Unmap().String()
		addrs = append(addrs, la.Unmap().String())
	}
	sort.Strings(addrs)
	switch {
	case len(addrs) == 0:
		out.NextHop = nextHopSelf
	case addrs[0] == addrs[len(addrs)-1]:
		out.NextHop = addrs[0]
	default:
		out.NextHop, out.NextHopByPeer = nextHopSelf, byPeer
	}
	return &out
}
