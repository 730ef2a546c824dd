package anycast

import (
	"fmt"
	"net/netip"

	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Attributes is what a VIP's path carries, as the status shows it.
type Attributes struct {
	NextHop string `json:"next_hop"`
	// NextHopByPeer: in the status, each session's next hop when the
	// path's is "self" and the sessions' local addresses differ.
	NextHopByPeer    map[string]string `json:"next_hop_by_peer,omitempty"`
	ASPath           []uint32          `json:"as_path_prepend,omitempty"` // before the session's own AS is added
	MED              *uint32           `json:"med,omitempty"`
	Communities      []string          `json:"communities,omitempty"`
	LargeCommunities []string          `json:"large_communities,omitempty"`
}

// key is a's identity: two paths with equal keys are the same on the wire.
func (a Attributes) key() string {
	med := "-"
	if a.MED != nil {
		med = fmt.Sprint(*a.MED)
	}
	return fmt.Sprint(a.NextHop, "|", a.ASPath, "|", med, "|", a.Communities, "|", a.LargeCommunities)
}

func (c *Config) attrsFor(v *vip, r route) Attributes {
	a := Attributes{NextHop: v.cfg.NextHop, MED: v.cfg.MED, Communities: append([]string(nil), v.cfg.Communities...)}
	if a.NextHop == "" {
		a.NextHop = c.NextHopV4
		if !v.prefix.Addr().Is4() {
			a.NextHop = c.NextHopV6
		}
	}
	if a.NextHop == "" {
		a.NextHop = "0.0.0.0" // GoBGP: the session's local address
		if !v.prefix.Addr().Is4() {
			a.NextHop = "::"
		}
	}
	state := SiteUp
	if r == routeDraining || r == routeHeld {
		state = SiteDraining
		if r == routeHeld {
			state = SiteHeld
		}
		a.Communities = append(a.Communities, "65535:0")
		for range *c.Drain.Prepend {
			a.ASPath = append(a.ASPath, c.LocalAS)
		}
	}
	a.LargeCommunities = append(append(a.LargeCommunities, v.cfg.LargeCommunities...),
		fmt.Sprintf("%d:%d:%d", c.Guard.CommunityASN, state.code(), c.SiteID))
	return a
}

func pathOf(prefix netip.Prefix, a *Attributes) (*api.Path, error) {
	fam := famV4
	if !prefix.Addr().Is4() {
		fam = famV6
	}
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: prefix.Addr().String(), PrefixLen: uint32(prefix.Bits())})
	if err != nil {
		return nil, err
	}
	msgs := []proto.Message{&api.OriginAttribute{Origin: 0}}
	if fam == famV4 {
		msgs = append(msgs, &api.NextHopAttribute{NextHop: a.NextHop})
	} else {
		msgs = append(msgs, &api.MpReachNLRIAttribute{Family: fam, NextHops: []string{a.NextHop}, Nlris: []*anypb.Any{nlri}})
	}
	if len(a.ASPath) > 0 {
		msgs = append(msgs, &api.AsPathAttribute{Segments: []*api.AsSegment{{Type: api.AsSegment_AS_SEQUENCE, Numbers: a.ASPath}}})
	}
	if a.MED != nil {
		msgs = append(msgs, &api.MultiExitDiscAttribute{Med: *a.MED})
	}
	if len(a.Communities) > 0 {
		var cs []uint32
		for _, s := range a.Communities {
			x, y, _ := parseCommunity(s)
			cs = append(cs, uint32(x)<<16|uint32(y))
		}
		msgs = append(msgs, &api.CommunitiesAttribute{Communities: cs})
	}
	var lcs []*api.LargeCommunity
	for _, s := range a.LargeCommunities {
		l, _ := parseLargeCommunity(s)
		lcs = append(lcs, &api.LargeCommunity{GlobalAdmin: l[0], LocalData1: l[1], LocalData2: l[2]})
	}
	msgs = append(msgs, &api.LargeCommunitiesAttribute{Communities: lcs})
	pattrs := make([]*anypb.Any, 0, len(msgs))
	for _, m := range msgs {
		x, err := anypb.New(m)
		if err != nil {
			return nil, err
		}
		pattrs = append(pattrs, x)
	}
	return &api.Path{Family: fam, Nlri: nlri, Pattrs: pattrs}, nil
}
