package anycast

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"google.golang.org/protobuf/types/known/anypb"
)

// speaker is the embedded GoBGP server: one per Announcer, dialling out to
// every peer, never listening. Paths learned from peers never enter its RIB
// (the import policy takes only local paths, so the node is never transit
// and its own paths always win); they are watched before policy to learn
// which sites announce the VIPs.
type speaker struct {
	s   *server.BgpServer
	cfg *Config
	log *slog.Logger

	cancelWatch context.CancelFunc
	mu          sync.Mutex
	learned     map[string]map[learnKey]SiteRoute // peer → (prefix, path id) → site
	onChange    func()
}

type learnKey struct {
	prefix netip.Prefix
	id     uint32
}

var (
	famV4 = &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	famV6 = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
)

func startSpeaker(ctx context.Context, c *Config, log *slog.Logger, onChange func()) (*speaker, error) {
	sp := &speaker{cfg: c, log: log, learned: map[string]map[learnKey]SiteRoute{}, onChange: onChange}
	sp.s = server.NewBgpServer(server.LoggerOption(&gobgpLog{log: log}))
	go sp.s.Serve() // GoBGP offers no way to end it; after Stop it idles
	err := sp.s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: c.LocalAS, RouterId: c.RouterID, ListenPort: -1,
	}})
	if err != nil {
		return nil, fmt.Errorf("start bgp (as %d, router id %s): %w", c.LocalAS, c.RouterID, err)
	}
	fail := func(err error) (*speaker, error) {
		sp.s.Stop()
		return nil, err
	}
	if err := sp.s.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: "rampart-local-only",
		Statements: []*api.Statement{{Name: "rampart-local",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ACCEPT}}}}}); err != nil {
		return fail(fmt.Errorf("add import policy: %w", err))
	}
	if err := sp.s.AddPolicyAssignment(ctx, &api.AddPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_IMPORT, DefaultAction: api.RouteAction_REJECT,
		Policies: []*api.Policy{{Name: "rampart-local-only"}}}}); err != nil {
		return fail(fmt.Errorf("assign import policy: %w", err))
	}
	wctx, cancel := context.WithCancel(context.Background())
	sp.cancelWatch = cancel
	if err := sp.s.WatchEvent(wctx, &api.WatchEventRequest{
		Peer:  &api.WatchEventRequest_Peer{},
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{{Type: api.WatchEventRequest_Table_Filter_ADJIN}}},
	}, sp.event); err != nil {
		cancel()
		return fail(fmt.Errorf("watch bgp events: %w", err))
	}
	for _, p := range c.Peers {
		if err := sp.s.AddPeer(ctx, &api.AddPeerRequest{Peer: peerAPI(c, p)}); err != nil {
			cancel()
			return fail(fmt.Errorf("add peer %s: %w", p.Address, err))
		}
	}
	return sp, nil
}

func peerAPI(c *Config, p Peer) *api.Peer {
	ap := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address, PeerAsn: p.AS, LocalAsn: c.LocalAS, AuthPassword: p.Password,
			Description: "rampart anycast"},
		Timers: &api.Timers{Config: &api.TimersConfig{ConnectRetry: uint64(p.ConnectRetryS),
			HoldTime: uint64(p.HoldTimeS), KeepaliveInterval: uint64(p.KeepaliveS),
			IdleHoldTimeAfterReset: uint64(p.ConnectRetryS)}},
		Transport:       &api.Transport{LocalAddress: p.LocalAddress, RemotePort: uint32(p.Port)},
		GracefulRestart: &api.GracefulRestart{Enabled: false},
	}
	if p.MultihopTTL > 0 {
		ap.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(p.MultihopTTL)}
	}
	for _, f := range p.Families {
		fam := famV4
		if f == "ipv6" {
			fam = famV6
		}
		ap.AfiSafis = append(ap.AfiSafis, &api.AfiSafi{
			Config:   &api.AfiSafiConfig{Family: fam, Enabled: true},
			AddPaths: &api.AddPaths{Config: &api.AddPathsConfig{Receive: true}},
		})
	}
	return ap
}

// event takes GoBGP's watch events (one goroutine, in order).
func (sp *speaker) event(r *api.WatchEventResponse) {
	changed := false
	sp.mu.Lock()
	if pe := r.GetPeer(); pe != nil && pe.Peer != nil && pe.Peer.State != nil {
		if st := pe.Peer.State; st.SessionState != api.PeerState_ESTABLISHED {
			changed = len(sp.learned[st.NeighborAddress]) > 0
			delete(sp.learned, st.NeighborAddress)
		}
	}
	for _, p := range r.GetTable().GetPaths() {
		if p.NeighborIp == "" || p.Nlri == nil {
			continue
		}
		pfx, err := nlriPrefix(p.Nlri)
		if err != nil {
			continue
		}
		k := learnKey{pfx, p.Identifier}
		m := sp.learned[p.NeighborIp]
		if m == nil {
			m = map[learnKey]SiteRoute{}
			sp.learned[p.NeighborIp] = m
		}
		site, ok := siteOf(p, sp.cfg.Guard.CommunityASN)
		if _, had := m[k]; had && (p.IsWithdraw || !ok) {
			delete(m, k)
			changed = true
		} else if ok && !p.IsWithdraw {
			site.From = p.NeighborIp
			m[k] = site
			changed = true
		}
	}
	sp.mu.Unlock()
	if changed && sp.onChange != nil {
		sp.onChange()
	}
}

func nlriPrefix(a *anypb.Any) (netip.Prefix, error) {
	var n api.IPAddressPrefix
	if err := a.UnmarshalTo(&n); err != nil {
		return netip.Prefix{}, err
	}
	addr, err := netip.ParseAddr(n.Prefix)
	if err != nil {
		return netip.Prefix{}, err
	}
	return addr.Unmap().Prefix(int(n.PrefixLen))
}

// siteOf reads the site community COMMUNITY_ASN:STATE:SITE from a path.
func siteOf(p *api.Path, asn uint32) (SiteRoute, bool) {
	for _, a := range p.Pattrs {
		var lc api.LargeCommunitiesAttribute
		if !a.MessageIs(&lc) || a.UnmarshalTo(&lc) != nil {
			continue
		}
		for _, c := range lc.Communities {
			if st, ok := siteStateOf(c.LocalData1); ok && c.GlobalAdmin == asn && c.LocalData2 != 0 {
				return SiteRoute{Site: c.LocalData2, State: st}, true
			}
		}
	}
	return SiteRoute{}, false
}

// sites returns what the peers sent back for prefix.
func (sp *speaker) sites(prefix netip.Prefix) []SiteRoute {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []SiteRoute
	for _, m := range sp.learned {
		for k, s := range m {
			if k.prefix == prefix {
				out = append(out, s)
			}
		}
	}
	return out
}

// set puts prefix's path with attributes a on the wire (replacing the
// previous one), or withdraws the path a when withdraw is set.
func (sp *speaker) set(ctx context.Context, prefix netip.Prefix, a *Attributes, withdraw bool) error {
	p, err := pathOf(prefix, a)
	if err != nil {
		return err
	}
	if withdraw {
		if err := sp.s.DeletePath(ctx, &api.DeletePathRequest{Family: p.Family, Path: p}); err != nil {
			return fmt.Errorf("withdraw %s: %w", prefix, err)
		}
		return nil
	}
	if _, err := sp.s.AddPath(ctx, &api.AddPathRequest{Path: p}); err != nil {
		return fmt.Errorf("announce %s: %w", prefix, err)
	}
	return nil
}

// SessionStatus is one BGP session.
type SessionStatus struct {
	Peer          string    `json:"peer"`
	AS            uint32    `json:"as"`
	LocalAddress  string    `json:"local_address,omitempty"`
	State         string    `json:"state"` // idle, connect, active, opensent, openconfirm, established
	Admin         string    `json:"admin"` // up, down
	Since         time.Time `json:"since,omitzero"`
	HoldTimeS     uint64    `json:"hold_time_s,omitempty"` // negotiated
	Received      uint64    `json:"received"`              // paths from the peer
	SentUpdates   uint64    `json:"sent_updates"`
	Notifications uint64    `json:"notifications_received"`
}

func (sp *speaker) sessions(ctx context.Context) []SessionStatus {
	var out []SessionStatus
	_ = sp.s.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		st := SessionStatus{Peer: p.GetConf().GetNeighborAddress(), AS: p.GetConf().GetPeerAsn(),
			LocalAddress: p.GetTransport().GetLocalAddress(),
			State:        strings.ToLower(p.GetState().GetSessionState().String()),
			Admin:        strings.ToLower(p.GetState().GetAdminState().String())}
		ts := p.GetTimers().GetState()
		if st.State == "established" && ts.GetUptime() != nil {
			st.Since, st.HoldTimeS = ts.GetUptime().AsTime(), ts.GetNegotiatedHoldTime()
		} else if ts.GetDowntime() != nil && ts.GetDowntime().AsTime().Unix() > 0 {
			st.Since = ts.GetDowntime().AsTime()
		}
		for _, af := range p.GetAfiSafis() {
			st.Received += af.GetState().GetReceived()
		}
		m := p.GetState().GetMessages()
		st.SentUpdates = m.GetSent().GetUpdate()
		st.Notifications = m.GetReceived().GetNotification()
		out = append(out, st)
	})
	return out
}

// shutdown closes every session with Cease/Administrative Shutdown and
// msg (RFC 8203), then stops the server.
func (sp *speaker) shutdown(ctx context.Context, msg string) {
	for _, p := range sp.cfg.Peers {
		if err := sp.s.DisablePeer(ctx, &api.DisablePeerRequest{Address: p.Address, Communication: msg}); err != nil {
			sp.log.Warn("anycast: administrative shutdown failed", "peer", p.Address, "err", err)
		}
	}
	// The notification goes out from each session's FSM; wait for it
	// before Stop deconfigures the peers (which would send its own Cease).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		open := false
		for _, s := range sp.sessions(ctx) {
			open = open || s.State == "established"
		}
		if !open {
			break
		}
	}
	sp.cancelWatch()
	sp.s.Stop()
}
