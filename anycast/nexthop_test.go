package anycast

import (
	"maps"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast/birdtest"
)

// TestBIRDNextHopSelf: with no next_hop_v4, GoBGP sends the session's
// local address; the status shows the next hop BIRD shows, not 0.0.0.0.
func TestBIRDNextHopSelf(t *testing.T) {
	const v4 = "192.0.2.80/32"
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{sitePeer(8)}})
	c := siteConfig(r, 8, VIP{Prefix: v4})
	c.NextHopV4 = ""
	s := startSite(t, c, nil)
	var atBIRD birdtest.Route
	birdtest.Wait(t, 15*time.Second, "the VIP at BIRD", func() bool {
		rt, ok := fromSite(routes(t, r, v4), 8)
		atBIRD = rt
		return ok && rt.NextHop != ""
	})
	st := s.vip(v4)
	if st.OnWire == nil || st.OnWire.NextHop != atBIRD.NextHop || atBIRD.NextHop != "127.0.0.9" {
		t.Fatalf("status next hop %+v, BIRD shows %q (want the session's local address 127.0.0.9)", st.OnWire, atBIRD.NextHop)
	}
	t.Logf("status and BIRD agree: next hop %s", atBIRD.NextHop)
}

func TestResolveNextHop(t *testing.T) {
	up := func(peer, local string) SessionStatus {
		return SessionStatus{Peer: peer, LocalAddress: local, State: "established"}
	}
	for _, tc := range []struct {
		name, nh string
		sessions []SessionStatus
		want     string
		byPeer   map[string]string
	}{
		{"explicit next hop kept", "198.51.100.1", []SessionStatus{up("192.0.2.1", "10.0.0.1")}, "198.51.100.1", nil},
		{"one v4 session", "0.0.0.0", []SessionStatus{up("192.0.2.1", "10.0.0.1"), up("2001:db8::1", "2001:db8::2")}, "10.0.0.1", nil},
		{"one v6 session", "::", []SessionStatus{up("192.0.2.1", "10.0.0.1"), up("2001:db8::1", "2001:db8::2")}, "2001:db8::2", nil},
		{"two sessions, one address", "0.0.0.0", []SessionStatus{up("192.0.2.1", "10.0.0.1"), up("192.0.2.2", "10.0.0.1")}, "10.0.0.1", nil},
		{"two sessions, two addresses", "0.0.0.0", []SessionStatus{up("192.0.2.1", "10.0.0.1"), up("192.0.2.2", "10.0.1.1")},
			nextHopSelf, map[string]string{"192.0.2.1": "10.0.0.1", "192.0.2.2": "10.0.1.1"}},
		{"no session established", "0.0.0.0", []SessionStatus{{Peer: "192.0.2.1", LocalAddress: "10.0.0.1", State: "active"}}, nextHopSelf, nil},
		{"no sessions", "0.0.0.0", nil, nextHopSelf, nil},
	} {
		a := &Attributes{NextHop: tc.nh}
		got := resolveNextHop(a, tc.sessions)
		if got.NextHop != tc.want || !maps.Equal(got.NextHopByPeer, tc.byPeer) || a.NextHop != tc.nh {
			t.Errorf("%s: got %+v (input now %+v), want %s %v", tc.name, got, a, tc.want, tc.byPeer)
		}
	}
	if resolveNextHop(nil, nil) != nil {
		t.Error("no path resolved to one")
	}
}
