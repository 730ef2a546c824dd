package anycast

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// fleet simulates sites deciding with a fake clock, each seeing the
// others' paths as they were `delay` samples ago (BGP propagation).
type fleet struct {
	engines []*engine
	history [][]VIPState // per sample, per site
	delay   int
}

func newFleet(t *testing.T, sites, minSites, delay int) *fleet {
	f := &fleet{delay: delay}
	for s := 1; s <= sites; s++ {
		c := unitConfig(uint32(s))
		c.Inputs[0].Rise, c.Inputs[0].Fall = 1, 1
		c.Guard.MinSites = &minSites
		f.engines = append(f.engines, newTestEngine(t, c))
	}
	return f
}

func (f *fleet) view(self int) func(netip.Prefix) []SiteRoute {
	return func(netip.Prefix) []SiteRoute {
		k := len(f.history) - 1 - f.delay
		if k < 0 {
			return nil
		}
		var out []SiteRoute
		for j, st := range f.history[k] {
			if j == self {
				continue
			}
			switch st {
			case StateAnnounced:
				out = append(out, SiteRoute{Site: uint32(j + 1), State: SiteUp})
			case StateDraining:
				out = append(out, SiteRoute{Site: uint32(j + 1), State: SiteDraining})
			case StateHeld:
				out = append(out, SiteRoute{Site: uint32(j + 1), State: SiteHeld})
			}
		}
		return out
	}
}

// step runs one sample at now with each site's health and returns how
// many sites have a path on the wire afterwards.
func (f *fleet) step(now time.Time, healthy []bool) (int, []VIPState) {
	states := make([]VIPState, len(f.engines))
	n := 0
	for i, e := range f.engines {
		e.byName["ready"].set, e.byName["ready"].up = true, healthy[i]
		e.sample(now)
		e.decide(now, f.view(i))
		states[i] = e.vips[0].state
		if states[i] != StateWithdrawn {
			n++
		}
	}
	f.history = append(f.history, states)
	return n, states
}

func all(n int, v bool) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestGuardFleetConverges(t *testing.T) {
	for _, tc := range []struct{ sites, minSites, delay int }{
		{3, 1, 0}, {3, 1, 2}, {3, 2, 0}, {3, 2, 3}, {5, 2, 1}, {5, 3, 5},
	} {
		t.Run(fmt.Sprintf("sites=%d/min=%d/delay=%d", tc.sites, tc.minSites, tc.delay), func(t *testing.T) {
			f := newFleet(t, tc.sites, tc.minSites, tc.delay)
			now := t0
			for i := 0; i < 5; i++ {
				f.step(now, all(tc.sites, true))
				now = now.Add(time.Second)
			}
			// Site 2 falls: it drains and goes; the others stay.
			h := all(tc.sites, true)
			h[1] = false
			var n int
			var st []VIPState
			for i := 0; i < 30; i++ {
				n, st = f.step(now, h)
				now = now.Add(time.Second)
			}
			if st[1] != StateWithdrawn || n != tc.sites-1 {
				t.Fatalf("one site down: %v", st)
			}
			// Every site falls: the lowest min_sites ids stay, held.
			for i := 0; i < 60; i++ {
				n, st = f.step(now, all(tc.sites, false))
				now = now.Add(time.Second)
				if n < tc.minSites {
					t.Fatalf("sample %d: only %d sites announce: %v", i, n, st)
				}
			}
			// The lowest ids of those still announcing (site 2 left) stay.
			stay := tc.minSites
			for i, s := range st {
				want := StateWithdrawn
				if i != 1 && stay > 0 {
					want, stay = StateHeld, stay-1
				}
				if s != want {
					t.Fatalf("all down: %v, want the lowest %d ids but site 2 held, the rest withdrawn", st, tc.minSites)
				}
			}
		})
	}
}

// TestGuardFleetRandomHealth flips sites' health at random and checks
// that at least min_sites always announce while the view lags behind by
// less than the drain time.
func TestGuardFleetRandomHealth(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		sites, minSites, delay := 3+rng.IntN(4), 1+rng.IntN(2), rng.IntN(10) // drain is 10 samples
		f := newFleet(t, sites, minSites, delay)
		now := t0
		h := all(sites, true)
		for i := 0; i < 3; i++ {
			f.step(now, h)
			now = now.Add(time.Second)
		}
		for i := 0; i < 1000; i++ {
			for s := range h {
				if rng.IntN(20) == 0 {
					h[s] = !h[s]
				}
			}
			if n, st := f.step(now, h); n < minSites {
				t.Fatalf("seed %d (sites %d, min %d, delay %d), sample %d: %d announce: %v", seed, sites, minSites, delay, i, n, st)
			}
			now = now.Add(time.Second)
		}
	}
}
