package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/anycast/birdtest"
	"github.com/rampart-edge/rampart/format/regionstate"
)

func regionInputConfig(rise, fall int) anycast.Config {
	one := 1
	return anycast.Config{LocalAS: 65001, RouterID: "127.0.0.20", SiteID: 1, NextHopV4: "198.51.100.1", DryRun: anycast.DryRunNoBGP,
		Inputs: []anycast.Input{{Name: InputProxyReady, Kind: anycast.KindBool, Global: true, Rise: 1, Fall: 1},
			{Name: InputRegion, Kind: anycast.KindBool, Global: true, Rise: rise, Fall: fall}},
		SampleIntervalMs: 50, Drain: anycast.Drain{TimeMs: 1000, Prepend: &one},
		Damping: anycast.Damping{HoldDownMs: 100}, Guard: anycast.Guard{CommunityASN: 64512}}
}

// watchInput samples an input's status until cond holds, failing if the
// debounced state changed before the run of samples reached the bound.
func watchInput(t *testing.T, a *Agent, what string, wantUp bool, bound int) anycast.InputStatus {
	t.Helper()
	var last anycast.InputStatus
	birdtest.Wait(t, 30*time.Second, what, func() bool {
		in := inputStatus(a, InputRegion)
		run := in.Bad
		if wantUp {
			run = in.Good
		}
		if in.Up == wantUp && run < bound && last.Samples > 0 && last.Up != wantUp {
			t.Fatalf("%s after %d samples in a row, want %d: %+v", what, run, bound, in)
		}
		last = in
		return in.Up == wantUp
	})
	return last
}

// TestRegionInputHysteresisAndStale: the region input falls after fall
// bad samples once a fresh region state says the region is unhealthy,
// rises after rise good ones, and a stale document withdraws nothing: the
// last decision stays, the detail and rampart_agent_region_decision_kept
// say so.
func TestRegionInputHysteresisAndStale(t *testing.T) {
	a, sf, apply := regionAgent(t, regionInputConfig(3, 4))
	const vip = "203.0.113.10/32"
	sf.write(time.Now(), map[string]bool{"us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	a.ac.setProxyReady(true, "200 ready")
	birdtest.Wait(t, 30*time.Second, "announced", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	sf.write(time.Now(), map[string]bool{"us": false})
	in := watchInput(t, a, "region input down", false, 4)
	if !strings.Contains(in.Detail, "region us unhealthy per region state 1.2") {
		t.Fatalf("detail: %+v", in)
	}
	birdtest.Wait(t, 30*time.Second, "VIP drained", func() bool { return announcedState(a, vip) != anycast.StateAnnounced })

	sf.write(time.Now(), map[string]bool{"us": true})
	watchInput(t, a, "region input up", true, 3)
	birdtest.Wait(t, 30*time.Second, "announced again", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	// Stale and unhealthy: not a reason to withdraw.
	sf.write(time.Now().Add(-time.Hour), map[string]bool{"us": false})
	birdtest.Wait(t, 30*time.Second, "stale noted", func() bool {
		d := inputStatus(a, InputRegion).Detail
		return strings.Contains(d, "region state 1.4 stale since") && strings.Contains(d, "keeping last decision (region us healthy")
	})
	before := inputStatus(a, InputRegion).Samples
	birdtest.Wait(t, 30*time.Second, "ten more samples", func() bool { return inputStatus(a, InputRegion).Samples >= before+10 })
	if in := inputStatus(a, InputRegion); !in.Up || announcedState(a, vip) != anycast.StateAnnounced {
		t.Fatalf("a stale document withdrew: %+v %s", in, announcedState(a, vip))
	}
	if v := testutil.ToFloat64(a.m.regionKept); v != 1 {
		t.Fatalf("rampart_agent_region_decision_kept %v, want 1", v)
	}
}

// TestRegionDrain: a region draining in a fresh document drains every VIP
// (source region) and withdraws it after the drain time; a stale document
// keeps the drain; a fresh one without it lifts it.
func TestRegionDrain(t *testing.T) {
	a, sf, apply := regionAgent(t, regionInputConfig(1, 1))
	const vip = "203.0.113.10/32"
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.regionDrainLoop(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	sf.write(time.Now(), map[string]bool{"us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	a.ac.setProxyReady(true, "200 ready")
	birdtest.Wait(t, 30*time.Second, "announced", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	sf.write(time.Now(), map[string]bool{"us": true}, "us")
	birdtest.Wait(t, 30*time.Second, "draining", func() bool { return announcedState(a, vip) == anycast.StateDraining })
	birdtest.Wait(t, 30*time.Second, "withdrawn", func() bool { return announcedState(a, vip) == anycast.StateWithdrawn })
	if v := drainedMetric(t, a, vip, anycast.DrainRegion); v != 1 {
		t.Fatalf("rampart_anycast_drained{source=region} %v", v)
	}
	sf.write(time.Now().Add(-time.Hour), map[string]bool{"us": true})
	before := inputStatus(a, InputRegion).Samples
	birdtest.Wait(t, 30*time.Second, "stale noted, ten more samples", func() bool {
		return testutil.ToFloat64(a.m.regionKept) == 1 && inputStatus(a, InputRegion).Samples >= before+10
	})
	if st := announcedState(a, vip); st != anycast.StateWithdrawn || len(a.ac.announcer().Drains()) != 1 {
		t.Fatalf("stale document lifted the drain: %s %+v", st, a.ac.announcer().Drains())
	}
	sf.write(time.Now(), map[string]bool{"us": true})
	birdtest.Wait(t, 30*time.Second, "back", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })
	if v := drainedMetric(t, a, vip, anycast.DrainRegion); v != 0 {
		t.Fatalf("rampart_anycast_drained{source=region} %v after the drain was lifted", v)
	}
}

func drainedMetric(t *testing.T, a *Agent, vip, source string) float64 {
	t.Helper()
	fams, err := a.ac.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "rampart_anycast_drained" {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["vip"] == vip && l["source"] == source {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// TestOperatorDrainAPIAndRestart: POST drain/undrain need the bearer
// token (401 without, 403 wrong), GETs do not; a drain withdraws the VIP
// after the drain time, survives an agent restart (the new announcer
// never announces the VIP), and `rampart anycast undrain` lifts it.
func TestOperatorDrainAPIAndRestart(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	const vip = "203.0.113.10/32"
	stateDir := t.TempDir()
	sf := newStateFile(t, regionTestKey(), t.TempDir())
	a, _, apply := regionAgentIn(t, regionInputConfig(1, 1), stateDir, sf, token)
	sf.write(time.Now(), map[string]bool{"us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	a.ac.setProxyReady(true, "200 ready")
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	birdtest.Wait(t, 30*time.Second, "announced", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	post := func(path, auth, body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(anycast.DrainPath, "", `{}`); c != http.StatusUnauthorized {
		t.Fatalf("no token: %d", c)
	}
	if c := post(anycast.DrainPath, "Bearer wrong-token-wrong-token", `{}`); c != http.StatusForbidden {
		t.Fatalf("wrong token: %d", c)
	}
	if resp, err := http.Get(srv.URL + anycast.StatusPath); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET status without a token: %v %v", resp, err)
	}
	if announcedState(a, vip) != anycast.StateAnnounced {
		t.Fatal("a refused drain drained")
	}

	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := anycast.Command([]string{"drain", "-addr", srv.URL, "-token-file", tokFile, "-vip", vip, "-reason", "maintenance"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "drained by operator: "+vip) || !strings.Contains(out.String(), "(maintenance)") {
		t.Fatalf("drain output: %s", out.String())
	}
	birdtest.Wait(t, 30*time.Second, "draining", func() bool { return announcedState(a, vip) == anycast.StateDraining })
	birdtest.Wait(t, 30*time.Second, "withdrawn", func() bool { return announcedState(a, vip) == anycast.StateWithdrawn })
	if v := drainedMetric(t, a, vip, anycast.DrainOperator); v != 1 {
		t.Fatalf("rampart_anycast_drained{source=operator} %v", v)
	}
	out.Reset()
	if err := anycast.Command([]string{"status", "-addr", srv.URL}, &out); err != nil || !strings.Contains(out.String(), "DRAINED by operator: "+vip) {
		t.Fatalf("status: %v\n%s", err, out.String())
	}

	// Restart: a new agent on the same state dir starts drained.
	srv.Close()
	_ = a.ac.announcer().Stop(context.Background())
	b, _, apply2 := regionAgentIn(t, regionInputConfig(1, 1), stateDir, sf, token)
	apply2(regionalConfig(), 2, "203.0.113.10")
	b.ac.setProxyReady(true, "200 ready")
	srv2 := httptest.NewServer(b.Handler())
	defer srv2.Close()
	before := inputStatus(b, InputRegion).Samples
	birdtest.Wait(t, 30*time.Second, "ten samples", func() bool { return inputStatus(b, InputRegion).Samples >= before+10 })
	if st := announcedState(b, vip); st != anycast.StateWithdrawn {
		t.Fatalf("after a restart the drained VIP is %s", st)
	}
	for _, v := range b.ac.announcer().Status().VIPs {
		if v.Prefix == vip && !strings.Contains(v.Drained, "drained by operator: maintenance") {
			t.Fatalf("status drained: %+v", v)
		}
	}
	out.Reset()
	if err := anycast.Command([]string{"undrain", "-addr", srv2.URL, "-token-file", tokFile, "-vip", vip}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no drains in force") {
		t.Fatalf("undrain output: %s", out.String())
	}
	birdtest.Wait(t, 30*time.Second, "announced after undrain", func() bool { return announcedState(b, vip) == anycast.StateAnnounced })
}

// TestGuardFromRegionStateSites: the guard counts the sites a fresh region
// state lists as announcing the VIP (site-b: a withdrawal is allowed;
// nobody: held), and falls back to BGP paths (none here) when stale.
func TestGuardFromRegionStateSites(t *testing.T) {
	a, sf, apply := regionAgent(t, regionInputConfig(1, 1))
	const vip = "203.0.113.10/32"
	other := func(on bool) {
		at := time.Now().Add(-2 * time.Hour)
		sf.sites = []regionstate.Site{{Name: "site-a", Region: "us", Announcing: []string{vip}, ReportedAt: at},
			{Name: "site-b", Region: "eu", Announcing: []string{}, ReportedAt: at}}
		if on {
			sf.sites[1].Announcing = []string{vip}
		}
	}
	guard := func() anycast.GuardStatus {
		for _, v := range a.ac.announcer().Status().VIPs {
			if v.Prefix == vip {
				return v.Guard
			}
		}
		return anycast.GuardStatus{}
	}
	other(false)
	sf.write(time.Now(), map[string]bool{"us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	a.ac.setProxyReady(true, "200 ready")
	birdtest.Wait(t, 30*time.Second, "announced", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	// Nobody else announces: the fall is held.
	sf.write(time.Now(), map[string]bool{"us": false})
	birdtest.Wait(t, 30*time.Second, "held", func() bool { return announcedState(a, vip) == anycast.StateHeld })
	if src := a.ac.announcer().Status().GuardSource; src != "control plane (region state 1.2)" {
		t.Fatalf("guard source %q", src)
	}
	// A stale document: back to BGP paths, which show nobody: still held.
	other(true)
	sf.write(time.Now().Add(-time.Hour), map[string]bool{"us": false})
	birdtest.Wait(t, 30*time.Second, "bgp fallback", func() bool {
		return strings.HasPrefix(a.ac.announcer().Status().GuardSource, "bgp paths; control plane view not fresh (region state 1.3 stale)")
	})
	if st := announcedState(a, vip); st != anycast.StateHeld {
		t.Fatalf("stale fleet view let it go: %s", st)
	}
	// Fresh, site-b announces, and the documents are made from reports
	// since this site began to drain (it reports leaving): the guard lets
	// it go.
	sf.sites[0].Announcing = []string{}
	freshReports(t, sf, a, vip, map[string]bool{"us": false})
	if g := guard(); len(g.Others) != 1 || g.Others[0].Name != "site-b" || !strings.Contains(g.Last, "1 other site(s) would stay") {
		t.Fatalf("guard: %+v", g)
	}
}

// TestGuardIgnoresARegionStateFromBeforeTheDrain: every site falls at
// once and stops reporting (their proxies, which carry the node clients,
// stopped). The last document lists them all as announcing, as they last
// reported; at the end of this site's drain it still lists this site
// announcing too, so it predates the drain and must not let the site
// withdraw counting on the others: held (BGP shows nobody). Once a
// document has heard this site leave, its view counts again.
func TestGuardIgnoresARegionStateFromBeforeTheDrain(t *testing.T) {
	a, sf, apply := regionAgent(t, regionInputConfig(1, 1))
	const vip = "203.0.113.10/32"
	at := time.Now()
	sf.sites = []regionstate.Site{{Name: "site-a", Region: "us", Announcing: []string{vip}, ReportedAt: at},
		{Name: "site-b", Region: "eu", Announcing: []string{vip}, ReportedAt: at},
		{Name: "site-c", Region: "ap", Announcing: []string{vip}, ReportedAt: at}}
	sf.write(time.Now(), map[string]bool{"us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	a.ac.setProxyReady(true, "200 ready")
	birdtest.Wait(t, 30*time.Second, "announced", func() bool { return announcedState(a, vip) == anycast.StateAnnounced })

	// The proxy stops: no new document comes (the node client stopped
	// with it); the last one is fresh and shows everybody announcing.
	a.ac.setProxyReady(false, "connection refused")
	birdtest.Wait(t, 30*time.Second, "held", func() bool { return announcedState(a, vip) == anycast.StateHeld })
	// Held, it may drain once more (the view, without a withdrawal to
	// decide, shows others up), but each drain ends held again: the path
	// never leaves. Three drains of 1 s.
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if st := announcedState(a, vip); st != anycast.StateHeld && st != anycast.StateDraining {
			t.Fatalf("a region state from before the drain let the VIP go: %s", st)
		}
	}

	// Documents that have heard this site leave but still list the others
	// as they reported before they stopped: still held (the case the lab's
	// all-unhealthy drill hit after the first half of the fix).
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		sf.sites[0].Announcing, sf.sites[0].ReportedAt = []string{}, time.Now()
		sf.write(time.Now(), map[string]bool{"us": true})
		if st := announcedState(a, vip); st != anycast.StateHeld && st != anycast.StateDraining {
			t.Fatalf("reports from before this site's drain let the VIP go: %s", st)
		}
	}

	// Documents made from reports since this site began to drain: site-b
	// still announces, so the guard lets this site go.
	sf.sites[0].Announcing = []string{}
	sf.sites[2].Announcing = []string{}
	freshReports(t, sf, a, vip, map[string]bool{"us": true})
}

// freshReports writes documents whose sites all reported just now, as
// the control plane publishes while nodes report, until vip is withdrawn.
func freshReports(t *testing.T, sf *stateFile, a *Agent, vip string, health map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for announcedState(a, vip) != anycast.StateWithdrawn {
		if time.Now().After(deadline) {
			t.Fatalf("not withdrawn within 30 s: %s", announcedState(a, vip))
		}
		now := time.Now()
		for i := range sf.sites {
			sf.sites[i].ReportedAt = now
		}
		sf.write(now, health)
		time.Sleep(50 * time.Millisecond)
	}
}

func regionTestKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
}

// TestRegionHealthWithBIRD: three sites at BIRD; the region state says
// site 1's region is unhealthy: the region input falls, site 1's path is
// drained (65535:0 at BIRD) and then withdrawn, the other two stay. Each
// step's time is logged as a FIGURE.
func TestRegionHealthWithBIRD(t *testing.T) {
	const vip = "203.0.113.10/32"
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{
		{Name: "site1", Address: "127.0.0.20", AS: 65001}, {Name: "site2", Address: "127.0.0.21", AS: 65002},
		{Name: "site3", Address: "127.0.0.22", AS: 65003}}})
	one := 1
	peer := func(local string) []anycast.Peer {
		return []anycast.Peer{{Address: "127.0.0.1", AS: 65000, Port: r.Port, LocalAddress: local, HoldTimeS: 3, KeepaliveS: 1, ConnectRetryS: 1}}
	}
	var others []*anycast.Announcer
	for _, id := range []uint32{2, 3} {
		addr := "127.0.0.2" + string(rune('0'+id-1))
		c := anycast.Config{LocalAS: 65000 + id, RouterID: addr, SiteID: id, NextHopV4: "198.51.100." + string(rune('0'+id)), Peers: peer(addr),
			VIPs: []anycast.VIP{{Prefix: vip}}, Inputs: []anycast.Input{{Name: "ready", Global: true, Rise: 1, Fall: 1}},
			SampleIntervalMs: 100, Drain: anycast.Drain{TimeMs: 1000, Prepend: &one}, Damping: anycast.Damping{HoldDownMs: 100},
			Guard: anycast.Guard{CommunityASN: 64512}}
		s, err := anycast.New(c, anycast.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		_ = s.SetUp("ready", false, "starting")
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = s.Stop(ctx)
		})
		others = append(others, s)
	}
	ac := regionInputConfig(1, 2)
	ac.DryRun, ac.Peers, ac.SampleIntervalMs = anycast.DryRunOff, peer("127.0.0.20"), 100
	a, sf, apply := regionAgent(t, ac)
	sf.write(time.Now(), map[string]bool{"eu": true, "us": true})
	apply(regionalConfig(), 1, "203.0.113.10")
	for _, s := range others {
		_ = s.SetUp("ready", true, "test")
	}
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
	birdtest.Wait(t, 30*time.Second, "three sites at BIRD", func() bool {
		return from("site1", false) && from("site2", false) && from("site3", false)
	})
	birdtest.Wait(t, 30*time.Second, "site 1 sees the two others", func() bool {
		for _, v := range a.ac.announcer().Status().VIPs {
			if v.Prefix == vip && len(v.Guard.Others) == 2 {
				return true
			}
		}
		return false
	})

	written := time.Now()
	sf.write(time.Now(), map[string]bool{"eu": true, "us": false})
	loaded := time.Now()
	birdtest.Wait(t, 30*time.Second, "site 1's region input down", func() bool { return !inputStatus(a, InputRegion).Up })
	fell := time.Now()
	birdtest.Wait(t, 30*time.Second, "site 1 drained at BIRD", func() bool { return from("site1", true) })
	drained := time.Now()
	birdtest.Wait(t, 30*time.Second, "site 1 withdrawn at BIRD", func() bool { return !from("site1", true) && !from("site1", false) })
	gone := time.Now()
	t.Logf("FIGURE region unhealthy in the region-state file -> agent holds the document: %v", loaded.Sub(written).Round(time.Millisecond))
	t.Logf("FIGURE document held -> agent fall (region input down, fall 2 x 100 ms samples): %v", fell.Sub(loaded).Round(time.Millisecond))
	t.Logf("FIGURE agent fall -> route drained at BIRD (65535:0): %v", drained.Sub(fell).Round(time.Millisecond))
	t.Logf("FIGURE route drained at BIRD -> withdrawn at BIRD (drain 1 s): %v", gone.Sub(drained).Round(time.Millisecond))
	if !from("site2", false) || !from("site3", false) {
		t.Fatal("another site's path went too")
	}
	sf.write(time.Now(), map[string]bool{"eu": true, "us": true})
	birdtest.Wait(t, 30*time.Second, "site 1 back at BIRD", func() bool { return from("site1", false) })
}
