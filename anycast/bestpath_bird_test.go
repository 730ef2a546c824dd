package anycast

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/anycast/birdtest"
)

// reports is the control plane in miniature: which sites announce the VIP,
// as each one's report says, refreshed by a poller.
type reports struct {
	mu  sync.Mutex
	ann map[string]bool
}

func (r *reports) view(self string) ControlView {
	return func(netip.Prefix, time.Time) ([]SiteRoute, bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var out []SiteRoute
		for name, on := range r.ann {
			if on && name != self {
				out = append(out, SiteRoute{Name: name, State: SiteUp})
			}
		}
		return out, true, "test reports"
	}
}

// TestBIRDBestPathOnlyGuardFromControlPlane: BIRD sends each speaker only
// its best path (no ADD-PATH), so the site whose path is best sees no
// other site over BGP. With the control plane's view the guard still
// counts the others: the best site may withdraw, the next too, and the
// last one is held when it falls, because the view shows it is the last.
func TestBIRDBestPathOnlyGuardFromControlPlane(t *testing.T) {
	const vip = "192.0.2.30/32"
	r := birdtest.Start(t, birdtest.Config{BestPathOnly: true, Peers: []birdtest.Peer{sitePeer(1), sitePeer(2), sitePeer(3)}})
	rep := &reports{ann: map[string]bool{}}
	sites := map[uint32]*site{}
	for id := uint32(1); id <= 3; id++ {
		c := siteConfig(r, id, VIP{Prefix: vip})
		name := fmt.Sprintf("site%d", id)
		reg := prometheus.NewRegistry()
		log := slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("site", id)
		a, err := New(c, Options{Registerer: reg, Logger: log, Control: rep.view(name)})
		if err != nil {
			t.Fatal(err)
		}
		_ = a.SetUp("ready", false, "starting")
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = a.Stop(ctx)
		})
		sites[id] = &site{Announcer: a, reg: reg}
	}
	// Each site reports what it announces, as the node client does
	// (control/nodeclient.AgentAnnouncing: announced or held, not draining).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			for id, s := range sites {
				st := s.vip(vip).State
				on := st == StateAnnounced || st == StateHeld
				rep.mu.Lock()
				rep.ann[fmt.Sprintf("site%d", id)] = on
				rep.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	for _, s := range sites {
		_ = s.SetUp("ready", true, "test")
	}
	birdtest.Wait(t, 15*time.Second, "three paths at BIRD", func() bool { return len(routes(t, r, vip)) == 3 })
	// Best path only: no site sees both others over BGP.
	for id, s := range sites {
		if n := len(s.sp.sites(netip.MustParsePrefix(vip))); n > 1 {
			t.Fatalf("site %d learned %d sites over BGP; BIRD should send only its best path", id, n)
		}
	}
	check := func() {
		if n := len(routes(t, r, vip)); n < 1 {
			t.Fatalf("no path left at BIRD")
		}
	}
	// The site whose path BIRD prefers falls first: without the control
	// plane's view it would see nobody and be held forever.
	var best uint32
	for id := uint32(1); id <= 3; id++ {
		if len(sites[id].sp.sites(netip.MustParsePrefix(vip))) == 0 {
			best = id
		}
	}
	if best == 0 {
		t.Fatal("no site is without BGP-learned sites: BIRD did send every path")
	}
	order := []uint32{best}
	for id := uint32(1); id <= 3; id++ {
		if id != best {
			order = append(order, id)
		}
	}
	for _, id := range order[:2] {
		_ = sites[id].SetUp("ready", false, "test: unhealthy")
		birdtest.Wait(t, 20*time.Second, fmt.Sprintf("site %d withdrawn", id), func() bool {
			check()
			_, has := fromSite(routes(t, r, vip), id)
			return !has && sites[id].vip(vip).State == StateWithdrawn
		})
		if src := sites[id].Status().GuardSource; src != "control plane (test reports)" {
			t.Fatalf("site %d guard source %q", id, src)
		}
	}
	last := order[2]
	_ = sites[last].SetUp("ready", false, "test: unhealthy")
	birdtest.Wait(t, 20*time.Second, "the last site held", func() bool {
		check()
		rt, has := fromSite(routes(t, r, vip), last)
		return has && drainedRoute(rt, last, 3) && sites[last].vip(vip).State == StateHeld
	})
	if n := len(routes(t, r, vip)); n != 1 {
		t.Fatalf("%d paths at BIRD, want the last site's only", n)
	}
}
