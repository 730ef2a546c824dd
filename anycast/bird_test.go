package anycast

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast/birdtest"
)

const (
	vip4 = "192.0.2.10/32"
	vip6 = "2001:db8::10/128"
)

// TestBIRDAnnounceDrainWithdrawRecover: one site, an IPv4 and an IPv6 VIP.
// Announced → visible at BIRD with its attributes; the input falls →
// drained (65535:0, prepends) → withdrawn; it rises → announced again; Stop
// drains, then closes the session with an administrative shutdown.
func TestBIRDAnnounceDrainWithdrawRecover(t *testing.T) {
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{sitePeer(1)}})
	c := siteConfig(r, 1,
		VIP{Prefix: vip4, Communities: []string{"65000:100"}, LargeCommunities: []string{"65000:7:7"}, MED: ptr(uint32(50))},
		VIP{Prefix: vip6})
	// The control plane says site 2 announces both VIPs, so the guard lets
	// this one go.
	fleet := func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 2, State: SiteUp}} }
	start := time.Now()
	s := startSite(t, c, fleet)
	figure(t, "session setup (Start to Established at BIRD)",
		birdtest.Wait(t, 15*time.Second, "session established", func() bool { return established(r, "site1") }))

	visible := func(net string) bool {
		rt, ok := fromSite(routes(t, r, net), 1)
		return ok && !rt.Has("65535:0")
	}
	birdtest.Wait(t, 10*time.Second, "both VIPs at BIRD", func() bool { return visible(vip4) && visible(vip6) })
	figure(t, "Start to both VIPs visible at BIRD", time.Since(start))
	v4, _ := fromSite(routes(t, r, vip4), 1)
	if v4.NextHop != "198.51.100.1" || !slices.Equal(v4.ASPath, []uint32{65001}) || v4.MED == nil || *v4.MED != 50 ||
		!v4.Has("65000:100") || !slices.Contains(v4.LargeCommunities, "65000:7:7") || !slices.Contains(v4.LargeCommunities, "64512:1:1") {
		t.Fatalf("IPv4 route at BIRD: %+v", v4)
	}
	if v6, _ := fromSite(routes(t, r, vip6), 1); v6.NextHop != "fd00::1" || !slices.Contains(v6.LargeCommunities, "64512:1:1") {
		t.Fatalf("IPv6 route at BIRD: %+v", v6)
	}
	if st := s.Status(); len(st.Sessions) != 1 || st.Sessions[0].State != "established" || st.Sessions[0].Since.IsZero() ||
		st.Sessions[0].HoldTimeS != 3 || st.VIPs[0].OnWire == nil || st.VIPs[0].OnWire.NextHop != "198.51.100.1" {
		t.Fatalf("status: %+v", st)
	}
	birdtest.Wait(t, 10*time.Second, "session and prefix gauges", func() bool {
		return s.metric(t, "rampart_anycast_sessions_up", "", "") == 1 && s.metric(t, "rampart_anycast_prefixes_announced", "", "") == 2
	})

	// Health falls: drain, then withdraw.
	if err := s.SetUp("ready", false, "proxy not ready"); err != nil {
		t.Fatal(err)
	}
	for _, net := range []string{vip4, vip6} {
		birdtest.Wait(t, 10*time.Second, "drained "+net+" at BIRD", func() bool {
			rt, ok := fromSite(routes(t, r, net), 1)
			return ok && drainedRoute(rt, 1, 2)
		})
	}
	fell := s.vip(vip4).Since // the fall decision: announced → draining
	figure(t, "fall decision to drained path at BIRD", time.Since(fell))
	if st := s.vip(vip4); st.State != StateDraining || st.OnWire == nil || st.DrainEnd.IsZero() {
		t.Fatalf("status while draining: %+v", st)
	}
	birdtest.Wait(t, 10*time.Second, "both VIPs gone from BIRD", func() bool {
		return len(routes(t, r, vip4)) == 0 && len(routes(t, r, vip6)) == 0
	})
	gone := time.Now()
	figure(t, "fall decision to route gone at BIRD (drain 1.5 s)", gone.Sub(fell))
	if st := s.vip(vip4); st.State != StateWithdrawn {
		t.Fatalf("status after the withdrawal: %+v", st)
	} else {
		figure(t, "withdraw decision to route gone at BIRD", gone.Sub(st.Since))
	}

	// Recovery: after rise samples (and the hold-down), announced again.
	if err := s.SetUp("ready", true, "proxy ready"); err != nil {
		t.Fatal(err)
	}
	birdtest.Wait(t, 10*time.Second, "VIPs back at BIRD", func() bool { return visible(vip4) && visible(vip6) })
	back := time.Now()
	if st := s.vip(vip4); st.State != StateAnnounced {
		t.Fatalf("status after recovery: %+v", st)
	} else {
		figure(t, "rise decision to route visible at BIRD", back.Sub(st.Since))
	}
	for to, min := range map[string]float64{"announce": 2, "drain": 1, "withdraw": 1} {
		if got := s.metric(t, "rampart_anycast_transitions_total", vip4, to); got < min {
			t.Errorf("transitions to %s: %v, want ≥ %v", to, got, min)
		}
	}

	// Stop: drain first (seen at BIRD), then an administrative shutdown.
	stopped := make(chan time.Time, 1)
	go func() {
		_ = s.Stop(context.Background())
		stopped <- time.Now()
	}()
	birdtest.Wait(t, 10*time.Second, "drained on stop", func() bool {
		rt, ok := fromSite(routes(t, r, vip6), 1)
		return ok && drainedRoute(rt, 1, 2)
	})
	var returned time.Time
	select {
	case returned = <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not return within 30 s")
	}
	// Order, not speed: Stop returned only once the drain it started had ended.
	if st := s.vip(vip4); st.State != StateDraining || st.DrainEnd.IsZero() || returned.Before(st.DrainEnd) {
		t.Fatalf("Stop returned at %s, drain state %+v", returned.Format(time.RFC3339Nano), st)
	}
	birdtest.Wait(t, 10*time.Second, "administrative shutdown at BIRD", func() bool {
		p, err := r.Protocol("site1")
		return err == nil && p.LastError == "Received: Administrative shutdown" && p.Message == "site 1 going down for maintenance"
	})
	if n := len(routes(t, r, vip4)) + len(routes(t, r, vip6)); n != 0 {
		t.Fatalf("%d routes left after Stop", n)
	}
}

// TestBIRDThreeSites: three sites announce one VIP pair and learn each
// other from the paths BIRD sends back (ADD-PATH). One unhealthy site goes
// and two stay; when all three are unhealthy, the guard keeps min_sites
// (1) announcing — the lowest site id — and raises its metric.
func TestBIRDThreeSites(t *testing.T) {
	const v4, v6 = "192.0.2.20/32", "2001:db8::20/128"
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{sitePeer(1), sitePeer(2), sitePeer(3)}})
	sites := map[uint32]*site{}
	for id := uint32(1); id <= 3; id++ {
		c := siteConfig(r, id, VIP{Prefix: v4}, VIP{Prefix: v6})
		c.Guard.Sites = 3
		sites[id] = startSiteWith(t, c, nil, false)
	}
	for _, s := range sites { // every speaker started: now they may announce
		_ = s.SetUp("ready", true, "test")
	}
	count := func(net string) int { return len(routes(t, r, net)) }
	birdtest.Wait(t, 15*time.Second, "three routes per VIP at BIRD", func() bool { return count(v4) == 3 && count(v6) == 3 })
	for id, s := range sites {
		birdtest.Wait(t, 10*time.Second, "each site sees the two others", func() bool {
			o := s.vip(v6).Guard.Others
			return len(o) == 2 && o[0].State == SiteUp && o[1].State == SiteUp
		})
		_ = id
	}

	// Site 2 falls: its route goes, two remain.
	_ = sites[2].SetUp("ready", false, "test: unhealthy")
	birdtest.Wait(t, 10*time.Second, "site 2's routes gone", func() bool {
		_, has4 := fromSite(routes(t, r, v4), 2)
		_, has6 := fromSite(routes(t, r, v6), 2)
		return !has4 && !has6
	})
	if count(v4) != 2 || count(v6) != 2 || sites[2].vip(v4).State != StateWithdrawn {
		t.Fatalf("after site 2 fell: %d/%d routes, site 2 %s", count(v4), count(v6), sites[2].vip(v4).State)
	}

	// Every site falls. Whatever the order of events, BIRD always has at
	// least min_sites routes, and it ends with site 1 held.
	for _, s := range sites {
		_ = s.SetUp("ready", false, "test: all unhealthy")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		rs4, rs6 := routes(t, r, v4), routes(t, r, v6)
		if len(rs4) < 1 || len(rs6) < 1 {
			t.Fatalf("fewer than min_sites routes: %v %v", rs4, rs6)
		}
		r1, ok := fromSite(rs4, 1)
		if len(rs4) == 1 && len(rs6) == 1 && ok && drainedRoute(r1, 1, 3) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not converge to site 1 held: %+v", rs4)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := sites[1].vip(v4)
	if st.State != StateHeld || !st.Guard.Active || sites[1].metric(t, "rampart_anycast_guard_active", v4, "") != 1 ||
		sites[1].metric(t, "rampart_anycast_guard_activations_total", v4, "") < 1 {
		t.Fatalf("site 1: %+v", st)
	}
	for _, id := range []uint32{2, 3} {
		if sites[id].vip(v4).State != StateWithdrawn || sites[id].metric(t, "rampart_anycast_guard_active", v4, "") != 0 {
			t.Fatalf("site %d: %+v", id, sites[id].vip(v4))
		}
	}
	t.Logf("site 1 held: %s", st.Reason)

	// All recover: three routes again.
	for _, s := range sites {
		_ = s.SetUp("ready", true, "test: healthy")
	}
	birdtest.Wait(t, 10*time.Second, "three routes again", func() bool { return count(v4) == 3 && count(v6) == 3 })
	if sites[1].metric(t, "rampart_anycast_guard_active", v4, "") != 0 {
		t.Fatal("guard still active after recovery")
	}
}

// TestBIRDReconfigure: a new VIP is announced, a changed attribute is
// re-announced, a removed VIP drains and is withdrawn, all on the same
// session; changing a peer is refused.
func TestBIRDReconfigure(t *testing.T) {
	const a4, b6 = "192.0.2.40/32", "2001:db8::40/128"
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{sitePeer(7)}})
	c := siteConfig(r, 7, VIP{Prefix: a4})
	s := startSite(t, c, nil)
	has := func(net string, f func(birdtest.Route) bool) bool {
		rt, ok := fromSite(routes(t, r, net), 7)
		return ok && f(rt)
	}
	any := func(birdtest.Route) bool { return true }
	birdtest.Wait(t, 15*time.Second, "first VIP", func() bool { return has(a4, any) })

	c.VIPs = []VIP{{Prefix: a4, MED: ptr(uint32(77))}, {Prefix: b6}}
	if err := s.Reconfigure(c); err != nil {
		t.Fatal(err)
	}
	birdtest.Wait(t, 10*time.Second, "new MED and new VIP", func() bool {
		return has(a4, func(rt birdtest.Route) bool { return rt.MED != nil && *rt.MED == 77 }) && has(b6, any)
	})

	c.VIPs = []VIP{{Prefix: b6}}
	if err := s.Reconfigure(c); err != nil {
		t.Fatal(err)
	}
	birdtest.Wait(t, 10*time.Second, "removed VIP drained", func() bool {
		return has(a4, func(rt birdtest.Route) bool { return drainedRoute(rt, 7, 2) })
	})
	birdtest.Wait(t, 10*time.Second, "removed VIP withdrawn", func() bool { return !has(a4, any) })
	if !has(b6, any) || len(s.Status().VIPs) != 1 {
		t.Fatalf("after removal: %+v", s.Status().VIPs)
	}

	c.Peers[0].HoldTimeS = 30
	if err := s.Reconfigure(c); err == nil || !strings.Contains(err.Error(), "peers") {
		t.Fatalf("peer change: %v", err)
	}
	c.VIPs = nil
	if err := s.Reconfigure(c); err == nil || !strings.Contains(err.Error(), "without VIPs") {
		t.Fatalf("no VIPs: %v", err)
	}
}
