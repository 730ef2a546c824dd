package agent

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/anycast/birdtest"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// regionAgent is an agent with anycast, region us, a region-state file and
// the region_serves_tenants input (global, rise 1, fall 2); its announcer
// starts with the first snapshot given to apply.
func regionAgent(t *testing.T, ac anycast.Config) (*Agent, *stateFile, func(c *snapshot.Config, seq uint64, vips ...string)) {
	t.Helper()
	return regionAgentIn(t, ac, t.TempDir(), newStateFile(t, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), t.TempDir()), "")
}

// regionAgentIn is regionAgent with a given state dir, state file and
// admin token, as site "site-a".
func regionAgentIn(t *testing.T, ac anycast.Config, stateDir string, sf *stateFile, token string) (*Agent, *stateFile, func(c *snapshot.Config, seq uint64, vips ...string)) {
	t.Helper()
	priv := sf.priv
	a, err := New(Config{Interfaces: []string{"lo"}, StateDir: stateDir, SnapshotDir: t.TempDir(), PublicKey: priv.Public().(ed25519.PublicKey),
		Region: "us", RegionState: sf.path, RegionStateMaxAge: time.Minute, SiteName: "site-a", AdminToken: token,
		Anycast: &ac, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sf.watch(a.rs)
	apply := func(c *snapshot.Config, seq uint64, vips ...string) {
		t.Helper()
		c.Listeners = []snapshot.Listener{{Name: "web", Protocols: []string{"http1"}}}
		c.L4.VIPs = nil
		for _, v := range vips {
			c.L4.VIPs = append(c.L4.VIPs, snapshot.VIP{Address: v, Ports: []snapshot.VIPPort{{Port: 80, Listener: "web"}}})
		}
		l, err := translate(c, a.c.limitsExtra(), 0)
		if err != nil {
			t.Fatal(err)
		}
		act := &activeSnap{snap: &snapshot.Snapshot{Version: snapshot.Version{Epoch: 1, Sequence: seq}, CreatedAt: time.Now(), Config: c}, l4: l}
		a.mu.Lock()
		a.active = act
		a.mu.Unlock()
		a.ac.update(act)
	}
	t.Cleanup(func() {
		if ann := a.ac.announcer(); ann != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = ann.Stop(ctx)
		}
	})
	return a, sf, apply
}

func regionInputs() []anycast.Input {
	return []anycast.Input{
		{Name: InputProxyReady, Kind: anycast.KindBool, Global: true, Rise: 1, Fall: 1},
		{Name: InputRegionServesTenants, Kind: anycast.KindBool, Global: true, Rise: 1, Fall: 2},
	}
}

func inputStatus(a *Agent, name string) anycast.InputStatus {
	for _, in := range a.ac.announcer().Status().Inputs {
		if in.Name == name {
			return in
		}
	}
	return anycast.InputStatus{}
}

func announcedState(a *Agent, prefix string) anycast.VIPState {
	for _, v := range a.ac.announcer().Status().VIPs {
		if v.Prefix == prefix {
			return v.State
		}
	}
	return ""
}

// TestRegionInputDrivesAnnouncer: in process (no BGP), the announcer's
// decision follows the region state and the snapshot's tenants through
// the region_serves_tenants input.
func TestRegionInputDrivesAnnouncer(t *testing.T) {
	one := 1
	ac := anycast.Config{LocalAS: 65001, RouterID: "127.0.0.20", SiteID: 1, NextHopV4: "198.51.100.1", DryRun: anycast.DryRunNoBGP,
		Inputs: regionInputs(), SampleIntervalMs: 50, Drain: anycast.Drain{TimeMs: 1000, Prepend: &one},
		Damping: anycast.Damping{HoldDownMs: 100}, Guard: anycast.Guard{CommunityASN: 64512}}
	a, sf, apply := regionAgent(t, ac)
	const vip = "203.0.113.10/32"
	sf.write(time.Now(), map[string]bool{"eu": true, "us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	a.ac.setProxyReady(true, "200 ready")
	wait := func(what string, cond func() bool) {
		t.Helper()
		birdtest.Wait(t, 30*time.Second, what, cond)
	}
	wait("announced", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })
	if in := inputStatus(a, InputRegionServesTenants); !in.Up || !strings.Contains(in.Detail, "healthy per region state 1.1") {
		t.Fatalf("input: %+v", in)
	}

	// The region state says us is unhealthy: the input falls after two
	// samples, the VIP drains.
	sf.write(time.Now(), map[string]bool{"eu": true, "us": false})
	wait("input down", func() bool { return !inputStatus(a, InputRegionServesTenants).Up })
	wait("VIP no longer announced", func() bool { return announcedState(a, vip) != anycast.StateAnnounced })
	if in := inputStatus(a, InputRegionServesTenants); !strings.Contains(in.Detail, "unhealthy per region state 1.2") {
		t.Fatalf("input detail: %+v", in)
	}
	st := a.Status()
	if len(st.RegionInputs) != 1 || st.RegionInputs[0].Serves || st.RegionState == nil || st.RegionState.Version != "1.2" {
		t.Fatalf("agent status: %+v %+v", st.RegionInputs, st.RegionState)
	}

	// A stale document is not a reason to come back, nor to withdraw: the
	// last verdict (unhealthy) stays.
	sf.write(time.Now().Add(-time.Hour), map[string]bool{"us": true})
	wait("stale noted", func() bool {
		return strings.Contains(inputStatus(a, InputRegionServesTenants).Detail, "stale: keeping the last verdict")
	})
	if in := inputStatus(a, InputRegionServesTenants); in.Up || announcedState(a, vip) == anycast.StateAnnounced {
		t.Fatalf("a stale healthy document brought the VIP back: %+v", in)
	}

	// Healthy and fresh: announced again.
	sf.write(time.Now(), map[string]bool{"us": true})
	wait("announced again", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	// A snapshot in which no tenant may be served in us withdraws too.
	c := regionalConfig()
	c.Tenants = c.Tenants[:1] // acme: fixed in eu
	apply(c, 2, "203.0.113.10")
	wait("withdrawn for want of tenants", func() bool {
		in := inputStatus(a, InputRegionServesTenants)
		return !in.Up && strings.Contains(in.Detail, "may serve none of the 1 tenants") && announcedState(a, vip) != anycast.StateAnnounced
	})
}

// TestRegionInputWithBIRD: two sites announce one VIP to BIRD; when the
// region state says this site's region is unhealthy its path drains and is
// withdrawn (the other site keeps the VIP, so the guard lets it go), and it
// comes back when the region is healthy again.
func TestRegionInputWithBIRD(t *testing.T) {
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{
		{Name: "site1", Address: "127.0.0.20", AS: 65001}, {Name: "site2", Address: "127.0.0.21", AS: 65002}}})
	const vip = "203.0.113.10/32"
	one := 1
	peer := func(local string) []anycast.Peer {
		return []anycast.Peer{{Address: "127.0.0.1", AS: 65000, Port: r.Port, LocalAddress: local, HoldTimeS: 3, KeepaliveS: 1, ConnectRetryS: 1}}
	}
	// Site 2, a plain announcer, starts with its input down (GoBGP's
	// package-level options race between speakers starting in one process).
	c2 := anycast.Config{LocalAS: 65002, RouterID: "127.0.0.21", SiteID: 2, NextHopV4: "198.51.100.2", Peers: peer("127.0.0.21"),
		VIPs: []anycast.VIP{{Prefix: vip}}, Inputs: []anycast.Input{{Name: "ready", Global: true, Rise: 1, Fall: 1}},
		SampleIntervalMs: 100, Drain: anycast.Drain{TimeMs: 1000, Prepend: &one}, Damping: anycast.Damping{HoldDownMs: 100},
		Guard: anycast.Guard{CommunityASN: 64512}}
	c2.Normalize()
	site2, err := anycast.New(c2, anycast.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = site2.SetUp("ready", false, "starting")
	if err := site2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = site2.Stop(ctx)
	})

	ac := anycast.Config{LocalAS: 65001, RouterID: "127.0.0.20", SiteID: 1, NextHopV4: "198.51.100.1", Peers: peer("127.0.0.20"),
		Inputs: regionInputs(), SampleIntervalMs: 100, Drain: anycast.Drain{TimeMs: 1000, Prepend: &one},
		Damping: anycast.Damping{HoldDownMs: 100}, Guard: anycast.Guard{CommunityASN: 64512}}
	a, sf, apply := regionAgent(t, ac)
	sf.write(time.Now(), map[string]bool{"eu": true, "us": true})
	apply(regionalConfig(), 1, "203.0.113.10") // starts site 1's speaker, proxy_ready still down
	_ = site2.SetUp("ready", true, "test")
	a.ac.setProxyReady(true, "200 ready")

	from := func(site string, drained bool) bool {
		rts, err := r.Routes()
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range rts {
			if rt.Net == vip && rt.Proto == site && rt.Has("65535:0") == drained {
				return true
			}
		}
		return false
	}
	birdtest.Wait(t, 30*time.Second, "both sites at BIRD", func() bool { return from("site1", false) && from("site2", false) })
	birdtest.Wait(t, 30*time.Second, "site 1 sees site 2", func() bool {
		for _, v := range a.ac.announcer().Status().VIPs {
			if v.Prefix == vip && len(v.Guard.Others) == 1 {
				return true
			}
		}
		return false
	})

	written := time.Now()
	sf.write(time.Now(), map[string]bool{"eu": true, "us": false})
	birdtest.Wait(t, 30*time.Second, "site 1 drained at BIRD", func() bool { return from("site1", true) })
	birdtest.Wait(t, 30*time.Second, "site 1 withdrawn at BIRD", func() bool { return !from("site1", true) && !from("site1", false) })
	t.Logf("FIGURE region unhealthy in the region state -> site 1's path withdrawn at BIRD: %v (fall 2 x 100 ms samples, drain 1 s)",
		time.Since(written).Round(time.Millisecond))
	if !from("site2", false) {
		t.Fatal("site 2's path went too")
	}
	if st := announcedState(a, vip); st != anycast.StateWithdrawn {
		t.Fatalf("site 1's VIP is %s, want withdrawn", st)
	}

	sf.write(time.Now(), map[string]bool{"eu": true, "us": true})
	birdtest.Wait(t, 30*time.Second, "site 1 back at BIRD", func() bool { return from("site1", false) })
}
