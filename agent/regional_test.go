package agent

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/regionwatch"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// regionalConfig: three regions; acme is fixed in eu (us allowed but not
// eligible), globex fails over from eu to us, initech spreads reads over
// eu and ap.
func regionalConfig() *snapshot.Config {
	return &snapshot.Config{
		Regions: []snapshot.RegionDef{{Name: "ap"}, {Name: "eu"}, {Name: "us"}},
		Tenants: []snapshot.Tenant{
			{ID: "acme", PrimaryRegion: "eu", AllowedRegions: []string{"eu", "us"}, FailoverMode: snapshot.FailoverFixed},
			{ID: "globex", PrimaryRegion: "eu", AllowedRegions: []string{"eu", "us"}, FailoverMode: snapshot.FailoverPrimaryBackup, BackupRegion: "us"},
			{ID: "initech", PrimaryRegion: "eu", AllowedRegions: []string{"ap", "eu"}, FailoverMode: snapshot.FailoverWeighted, WeightedOptIn: true},
		},
	}
}

func TestTenantsServed(t *testing.T) {
	c := regionalConfig()
	for _, x := range []struct {
		region         string
		ids            []string
		served, listed int
	}{
		{"eu", nil, 3, 3},
		{"us", nil, 1, 3}, // globex's backup; acme is fixed
		{"ap", nil, 1, 3}, // initech, weighted
		{"sa", nil, 0, 3},
		{"us", []string{"acme"}, 0, 1},
		{"us", []string{"acme", "globex"}, 1, 2},
		{"ap", []string{"acme", "globex"}, 0, 2},
		{"eu", []string{"nobody"}, 0, 0},
	} {
		if s, l := tenantsServed(c, x.region, x.ids); s != x.served || l != x.listed {
			t.Errorf("region %s, tenants %v: %d of %d, want %d of %d", x.region, x.ids, s, l, x.served, x.listed)
		}
	}
}

// stateFile is a region-state file the tests rewrite, and a watcher of it.
type stateFile struct {
	t    *testing.T
	priv ed25519.PrivateKey
	path string
	w    *regionwatch.Watcher
	seq  uint64
	// sites go into every document written (the control plane's fleet view).
	sites []regionstate.Site
}

func newStateFile(t *testing.T, priv ed25519.PrivateKey, dir string) *stateFile {
	return &stateFile{t: t, priv: priv, path: filepath.Join(dir, "region-state.json")}
}

// watch starts w (the agent's or a new one) on the file.
func (f *stateFile) watch(w *regionwatch.Watcher) {
	if w == nil {
		var err error
		w, err = regionwatch.New(regionwatch.Config{Path: f.path, PublicKey: f.priv.Public().(ed25519.PublicKey),
			MaxAge: time.Minute, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			f.t.Fatal(err)
		}
	}
	f.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// write signs a document created at created with the given regions'
// health ("eu": true, ...) and waits until the watcher holds it.
func (f *stateFile) write(created time.Time, health map[string]bool, draining ...string) {
	f.t.Helper()
	f.seq++
	s := &regionstate.State{Version: envelope.Version{Epoch: 1, Sequence: f.seq}, Created: created, Sites: f.sites}
	for name, ok := range health {
		s.Regions = append(s.Regions, regionstate.Region{Name: name, Healthy: ok, Draining: strings.Contains(strings.Join(draining, ","), name)})
	}
	file, err := regionstate.Build(f.priv, s)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(f.path, file, 0o644); err != nil {
		f.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if cur, _ := f.w.Current(); cur != nil && cur.Version.Sequence == f.seq {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("region state 1.%d not applied within 30 s: %+v", f.seq, f.w.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRegionGuardDecision: the input follows the tenants of the snapshot
// and a fresh region state; a stale one keeps the last verdict.
func TestRegionGuardDecision(t *testing.T) {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	sf := newStateFile(t, priv, t.TempDir())
	sf.watch(nil)
	c := regionalConfig()
	g := &regionGuard{region: "us", groups: map[string][]string{"acme-only": {"acme"}, "both": {"acme", "globex"}}, state: sf.w}
	expect := func(input string, up bool, says string) {
		t.Helper()
		got, detail := g.decide(c, input)
		if got != up || !strings.Contains(detail, says) {
			t.Fatalf("%s: %v (%s), want %v saying %q", input, got, detail, up, says)
		}
	}
	all, acme, both := InputRegionServesTenants, InputRegionServesTenants+":acme-only", InputRegionServesTenants+":both"

	// No document yet: the tenants decide.
	expect(all, true, "may serve 1 of 3 tenants; region state absent: not a reason to withdraw")
	expect(acme, false, "may serve none of the 1 tenants of group acme-only")
	expect(both, true, "may serve 1 of 2 tenants of group both")
	if up, detail := g.decide(nil, all); up || detail != "no active snapshot" {
		t.Fatalf("no snapshot: %v %s", up, detail)
	}
	if up, _ := g.decide(&snapshot.Config{}, acme); !up {
		t.Fatal("a snapshot without a regional policy withdraws")
	}

	// A fresh document: us unhealthy, then healthy, then draining.
	sf.write(time.Now(), map[string]bool{"eu": true, "us": false})
	expect(all, false, "region us unhealthy per region state 1.1")
	expect(both, false, "unhealthy")
	sf.write(time.Now(), map[string]bool{"eu": true, "us": true})
	expect(all, true, "region us healthy per region state 1.2")
	sf.write(time.Now(), map[string]bool{"us": true}, "us")
	expect(all, false, "region us draining per region state 1.3")

	// Stale (created an hour ago, max age 1 min): the last verdict stays,
	// and says why.
	sf.write(time.Now().Add(-time.Hour), map[string]bool{"us": true})
	expect(all, false, "region state 1.4 is stale: keeping the last verdict (region us draining per region state 1.3)")
	// A fresh document that does not list us: unknown, the last verdict stays.
	sf.write(time.Now(), map[string]bool{"eu": true})
	expect(all, false, "region state 1.5 does not list region us: keeping the last verdict")
	sf.write(time.Now(), map[string]bool{"us": true})
	expect(all, true, "healthy per region state 1.6")
	sf.write(time.Now().Add(-time.Hour), map[string]bool{"us": false})
	expect(all, true, "region state 1.7 is stale: keeping the last verdict (region us healthy per region state 1.6)")

	// The snapshot decides whatever the state says: no tenant for us.
	c.Tenants = c.Tenants[:1]
	expect(all, false, "may serve none of the 1 tenants")
}

func TestParseTenantGroups(t *testing.T) {
	g, err := ParseTenantGroups([]byte("shop: [globex, acme]\nsearch: [initech]\n"))
	if err != nil || len(g) != 2 || g["shop"][0] != "acme" || g["search"][0] != "initech" {
		t.Fatalf("ParseTenantGroups = %v, %v", g, err)
	}
	if g, err := ParseTenantGroups([]byte("{}")); err != nil || len(g) != 0 {
		t.Fatalf("{} = %v, %v", g, err)
	}
	for _, x := range []struct{ src, want string }{
		{"", "empty"},
		{"shop: []", "no tenants"},
		{"shop: [a, a]", "listed twice"},
		{"shop: ['']", "empty tenant id"},
		{"'sh op': [a]", "not one of"},
		{strings.Repeat("x", 60) + ": [a]", "want 1-42 bytes"},
		{"shop: a", "cannot unmarshal"},
		{"shop: [a]\n---\nx: [b]\n", "more than one"},
	} {
		if _, err := ParseTenantGroups([]byte(x.src)); err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("%q: %v, want an error saying %q", x.src, err, x.want)
		}
	}
}

func FuzzParseTenantGroups(f *testing.F) {
	f.Add([]byte("shop: [globex, acme]\nsearch: [initech]\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseTenantGroups(data)
		if err != nil {
			return
		}
		for name, ids := range g {
			if checkGroupName(name) != nil || len(ids) == 0 {
				t.Fatalf("accepted group %q = %v", name, ids)
			}
			for i := 1; i < len(ids); i++ {
				if ids[i-1] >= ids[i] {
					t.Fatalf("group %q not sorted and unique: %v", name, ids)
				}
			}
		}
	})
}

func TestCheckRegionInputs(t *testing.T) {
	ac := &anycast.Config{Inputs: []anycast.Input{
		{Name: InputRegionServesTenants, Kind: anycast.KindBool},
		{Name: InputRegionServesTenants + ":shop", Kind: anycast.KindBool},
	}}
	if err := checkRegionInputs(ac, "eu", map[string][]string{"shop": {"a"}}); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	err := checkRegionInputs(ac, "", nil)
	if err == nil || !strings.Contains(err.Error(), "needs the agent's -region") || !strings.Contains(err.Error(), `group "shop"`) {
		t.Fatalf("no region, no groups: %v", err)
	}
	ac.Inputs[0].Kind = anycast.KindAge
	if err := checkRegionInputs(ac, "eu", map[string][]string{"shop": {"a"}}); err == nil || !strings.Contains(err.Error(), "kind bool") {
		t.Fatalf("wrong kind: %v", err)
	}
	_, pubPEM, _ := snapshot.GenerateKey()
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	if _, err := New(Config{Interfaces: []string{"lo"}, StateDir: t.TempDir(), SnapshotDir: t.TempDir(), PublicKey: pub,
		Anycast: ac, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err == nil {
		t.Fatal("New accepted region inputs without -region")
	}
}
