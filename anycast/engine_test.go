package anycast

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// unitConfig is a valid one-VIP config with one global bool input.
func unitConfig(site uint32) Config {
	c := Config{LocalAS: 65000 + site, RouterID: fmt.Sprintf("198.51.100.%d", site), SiteID: site,
		Peers:            []Peer{{Address: "192.0.2.254", AS: 65000}},
		VIPs:             []VIP{{Prefix: "192.0.2.10/32"}},
		Inputs:           []Input{{Name: "ready", Global: true, Rise: 3, Fall: 2}},
		SampleIntervalMs: 1000, Drain: Drain{TimeMs: 10000},
		Damping: Damping{HoldDownMs: 5000, MaxHoldDownMs: 40000, FlapWindowMs: 100000},
		Guard:   Guard{CommunityASN: 64512}}
	c.Normalize()
	return c
}

func newTestEngine(t *testing.T, c Config) *engine {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return newEngine(&c, t0)
}

func noSites(netip.Prefix) []SiteRoute { return nil }

func TestInputHysteresis(t *testing.T) {
	for _, tc := range []struct {
		rise, fall int
		samples    string // u: good, d: bad
		want       string // debounced state after each sample
	}{
		{3, 2, "uuuuddu", "__UUU__"},
		{1, 1, "udud", "U_U_"},
		{3, 2, "uudu" + "uuu", "_____UU"},
		{2, 3, "uudduddd", "_UUUUUU_"},
	} {
		in := newInput(Input{Name: "x", Kind: KindBool, Rise: tc.rise, Fall: tc.fall}, t0)
		in.set = true
		got := ""
		for i, s := range tc.samples {
			in.up = s == 'u'
			in.sample(t0.Add(time.Duration(i) * time.Second))
			got += map[bool]string{true: "U", false: "_"}[in.state]
		}
		if got != tc.want {
			t.Errorf("rise %d fall %d samples %s: got %s, want %s", tc.rise, tc.fall, tc.samples, got, tc.want)
		}
	}
}

func TestInputKinds(t *testing.T) {
	share := newInput(Input{Name: "s", Kind: KindShare, MinShare: 0.5, Rise: 1, Fall: 1}, t0)
	age := newInput(Input{Name: "a", Kind: KindAge, MaxAgeMs: 60000, Rise: 1, Fall: 1}, t0)
	for _, tc := range []struct {
		in   *input
		set  func()
		now  time.Time
		want bool
	}{
		{share, func() {}, t0, false}, // never set
		{share, func() { share.set, share.healthy, share.size = true, 0, 0 }, t0, false},
		{share, func() { share.healthy, share.size = 1, 3 }, t0, false},
		{share, func() { share.healthy, share.size = 2, 4 }, t0, true},
		{age, func() {}, t0, false},
		{age, func() { age.set, age.at = true, t0 }, t0.Add(time.Minute), true},
		{age, func() {}, t0.Add(time.Minute + time.Millisecond), false},
	} {
		tc.set()
		if ok, detail := tc.in.raw(tc.now); ok != tc.want {
			t.Errorf("%s: raw = %v (%s), want %v", tc.in.cfg.Name, ok, detail, tc.want)
		}
	}
}

// run samples and decides once per second from `from` for n seconds with
// the input at up, and returns the time after.
func run(e *engine, from time.Time, n int, up bool, sites func(netip.Prefix) []SiteRoute) time.Time {
	for i := 0; i < n; i++ {
		e.byName["ready"].set, e.byName["ready"].up = true, up
		e.sample(from)
		e.decide(from, sites)
		from = from.Add(time.Second)
	}
	return from
}

func TestVIPCycle(t *testing.T) {
	e := newTestEngine(t, unitConfig(1))
	v := e.vips[0]
	// Announced only after rise (3) good samples.
	now := run(e, t0, 2, true, noSites)
	if v.state != StateWithdrawn {
		t.Fatalf("after 2 good samples: %s", v.state)
	}
	now = run(e, now, 1, true, noSites)
	if v.state != StateAnnounced {
		t.Fatalf("after 3 good samples: %s (%s)", v.state, v.reason)
	}
	// Falls after 2 bad samples, then drains for 10 s.
	now = run(e, now, 2, false, noSites)
	if v.state != StateDraining || v.drainEnd != now.Add(-time.Second).Add(10*time.Second) {
		t.Fatalf("after 2 bad samples: %s until %s", v.state, v.drainEnd)
	}
	// After the drain, with no other site seen, the guard holds it.
	now = run(e, now, 10, false, noSites)
	if v.state != StateHeld {
		t.Fatalf("after the drain, alone: %s (%s)", v.state, v.reason)
	}
	// Another site up: the guard lets it go, after one more drain (others
	// may have counted on it while it was held).
	other := func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 2, State: SiteUp}} }
	now = run(e, now, 1, false, other)
	if v.state != StateDraining {
		t.Fatalf("with another site up: %s (%s)", v.state, v.reason)
	}
	now = run(e, now, 10, false, other)
	if v.state != StateWithdrawn {
		t.Fatalf("with another site up, after the drain: %s (%s)", v.state, v.reason)
	}
	// Recovery: rise (3) samples, and the 5 s hold-down since the fall has
	// long passed.
	now = run(e, now, 3, true, other)
	if v.state != StateAnnounced {
		t.Fatalf("after recovery: %s (%s)", v.state, v.reason)
	}
	// A planned stop drains from announced and never returns.
	e.stopping = true
	run(e, now, 1, true, other)
	if v.state != StateDraining || v.reason != "stopping" || e.drained(now) {
		t.Fatalf("stop: %s (%s), drained %v", v.state, v.reason, e.drained(now))
	}
	run(e, now.Add(time.Second), 12, true, other)
	if v.state != StateDraining || !e.drained(now.Add(12*time.Second)) {
		t.Fatalf("stop after the drain: %s, drained %v", v.state, e.drained(now.Add(12*time.Second)))
	}
}

func TestRecoveryDuringDrainCancelsIt(t *testing.T) {
	c := unitConfig(1)
	c.Inputs[0].Rise, c.Inputs[0].Fall = 1, 1
	c.Damping.HoldDownMs = 2000
	e := newTestEngine(t, c)
	v := e.vips[0]
	now := run(e, t0, 1, true, noSites)
	now = run(e, now, 1, false, noSites) // falls at t0+1s
	if v.state != StateDraining {
		t.Fatal(v.state)
	}
	now = run(e, now, 1, true, noSites) // t0+2s: up again, but hold-down until t0+3s
	if v.state != StateDraining {
		t.Fatalf("inside the hold-down: %s", v.state)
	}
	run(e, now, 1, true, noSites) // t0+3s
	if v.state != StateAnnounced {
		t.Fatalf("after the hold-down: %s (%s)", v.state, v.reason)
	}
}

func TestDampingBackoff(t *testing.T) {
	c := unitConfig(1) // hold-down 5 s, max 40 s, window 100 s
	e := newTestEngine(t, c)
	v := e.vips[0]
	for _, tc := range []struct {
		downs []time.Duration // falls, relative to t0
		now   time.Duration
		want  time.Duration // re-announce allowed at, relative to t0; -1: no hold-down
	}{
		{nil, 0, -1},
		{[]time.Duration{0}, time.Second, 5 * time.Second},
		{[]time.Duration{0, 10 * time.Second}, 11 * time.Second, 20 * time.Second},
		{[]time.Duration{0, 10 * time.Second, 30 * time.Second}, 31 * time.Second, 50 * time.Second},
		{[]time.Duration{0, 1e9, 2e9, 3e9, 4e9, 5e9}, 6 * time.Second, 45 * time.Second}, // capped at max
		// The first fall left the 100 s window: one recent fall, base hold-down.
		{[]time.Duration{0, 60 * time.Second}, 101 * time.Second, 65 * time.Second},
		{[]time.Duration{0}, 200 * time.Second, -1},
	} {
		v.downs = nil
		for _, d := range tc.downs {
			v.downs = append(v.downs, t0.Add(d))
		}
		at, _ := e.reannounceAt(v, t0.Add(tc.now))
		want := time.Time{}
		if tc.want >= 0 {
			want = t0.Add(tc.want)
		}
		if !at.Equal(want) {
			t.Errorf("downs %v at %s: re-announce at %s, want %s", tc.downs, tc.now, at, want)
		}
	}
}

func TestFlappingInputIsDamped(t *testing.T) {
	c := unitConfig(1)
	c.Inputs[0].Rise, c.Inputs[0].Fall = 1, 1
	c.Damping = Damping{HoldDownMs: 5000, MaxHoldDownMs: 300000, FlapWindowMs: 600000}
	e := newTestEngine(t, c)
	v := e.vips[0]
	other := func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 2, State: SiteUp}} }
	// The input flips every 15 s for 10 minutes: undamped, that is 20
	// announcements. The hold-down doubles with every fall (5, 10, 20, 40,
	// 80, 160 s), so announcements thin out.
	now := t0
	var at []time.Duration
	for i := 0; i < 600; i++ {
		before := v.state
		now = run(e, now, 1, (i/15)%2 == 0, other)
		if v.state == StateAnnounced && before != StateAnnounced {
			at = append(at, now.Sub(t0))
		}
	}
	if len(at) > 8 {
		t.Fatalf("%d announcements in 10 minutes of flapping: %v", len(at), at)
	}
	for i := 2; i < len(at); i++ {
		if at[i]-at[i-1] < at[i-1]-at[i-2] {
			t.Fatalf("gaps between announcements shrink: %v", at)
		}
	}
	t.Logf("announced at %v", at)
}

func TestGuardAllows(t *testing.T) {
	up := func(s uint32) SiteRoute { return SiteRoute{Site: s, State: SiteUp} }
	held := func(s uint32) SiteRoute { return SiteRoute{Site: s, State: SiteHeld} }
	drain := func(s uint32) SiteRoute { return SiteRoute{Site: s, State: SiteDraining} }
	for _, tc := range []struct {
		self   uint32
		min    int
		others []SiteRoute
		want   bool
	}{
		{2, 1, nil, false},
		{2, 1, []SiteRoute{up(1)}, true},
		{2, 2, []SiteRoute{up(1)}, false},
		{2, 1, []SiteRoute{drain(1), drain(3)}, false}, // leaving sites do not count
		{2, 1, []SiteRoute{held(1)}, true},             // a lower held site stays
		{2, 1, []SiteRoute{held(3)}, false},            // a higher one may go
		{1, 1, []SiteRoute{held(2), held(3)}, false},   // the lowest id stays
		{3, 2, []SiteRoute{held(1), held(2)}, true},
		{2, 2, []SiteRoute{held(1), held(3)}, false},
		{3, 2, []SiteRoute{up(1), drain(2), held(4)}, false},
	} {
		if got, _, why := guardAllows(tc.self, tc.min, tc.others); got != tc.want {
			t.Errorf("site %d min %d others %v: %v (%s), want %v", tc.self, tc.min, tc.others, got, why, tc.want)
		}
	}
}

func TestMergeSitesKeepsTheLeastCountingState(t *testing.T) {
	bgp := []SiteRoute{{Site: 2, State: SiteUp}, {Site: 3, State: SiteUp}, {Site: 1, State: SiteUp}, {Site: 4, State: SiteHeld}}
	fleet := []SiteRoute{{Site: 3, State: SiteDraining}, {Site: 5, State: SiteUp}, {Site: 4, State: SiteUp}, {Site: 6, State: "bogus"}}
	got := fmt.Sprint(mergeSites(1, bgp, fleet))
	want := "[{2 up  } {3 draining  } {4 held  } {5 up  }]"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
