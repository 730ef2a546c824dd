package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/revision"
	"github.com/rampart-edge/rampart/control/server"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/routecheck"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// written runs Write with the default plan into a temp dir.
func written(t *testing.T) *Paths {
	t.Helper()
	p, err := Write(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// demoConfig loads the snapshot config the way the control plane does
// (strict parse, normalise, validate, route table).
func demoConfig(t *testing.T, p *Paths) *snapshot.Config {
	t.Helper()
	body, err := os.ReadFile(p.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := revision.Parse(body, "application/yaml")
	if err != nil {
		t.Fatalf("parse %s: %v", p.Snapshot, err)
	}
	if err := revision.Check(cfg, snapshot.Version{Epoch: 1, Sequence: 1}); err != nil {
		t.Fatalf("check %s: %v\n%s", p.Snapshot, strings.Join(revision.Problems(err), "\n"), body)
	}
	return cfg
}

func TestSnapshotBuildsSignsAndVerifies(t *testing.T) {
	p := written(t)
	cfg := demoConfig(t, p)
	priv, err := snapshot.ReadPrivateKey(p.SnapshotKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := snapshot.ReadPublicKey(p.SnapshotPub)
	if err != nil {
		t.Fatal(err)
	}
	file, err := revision.Build(cfg, snapshot.Version{Epoch: 1, Sequence: 2}, priv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Parse(file, pub)
	if err != nil {
		t.Fatalf("verify the demo snapshot with %s: %v", p.SnapshotPub, err)
	}
	c := s.Config
	if len(c.L4.VIPs) != 2 || c.L4.VIPs[0].Address != DefaultVIP4.String() || c.L4.VIPs[1].Address != DefaultVIP6.String() {
		t.Errorf("VIPs %+v, want %s and %s", c.L4.VIPs, DefaultVIP4, DefaultVIP6)
	}
	if c.L4.Limits != DefaultLimits {
		t.Errorf("l4 limits %+v, want %+v", c.L4.Limits, DefaultLimits)
	}
	modes := map[string]string{}
	for _, tn := range c.Tenants {
		modes[tn.ID] = tn.FailoverMode
	}
	if modes[FixedTenant] != snapshot.FailoverFixed || modes[BackupTenant] != snapshot.FailoverPrimaryBackup {
		t.Errorf("tenant modes %v", modes)
	}
	routes := map[string]snapshot.Route{}
	for _, r := range c.Routes {
		routes[r.ID] = r
	}
	for id, want := range map[string]struct{ class, auth string }{
		"whoami": {"read", ""}, "get-item": {"read", "demo-jwt"}, "put-item": {"write", "demo-jwt"}, "get-report": {"read", "demo-keys"},
	} {
		r, ok := routes[id]
		if !ok || r.RequestClass != want.class || r.AuthPolicyID != want.auth {
			t.Errorf("route %s: %+v, want class %s auth %q", id, r, want.class, want.auth)
		}
	}
	var eps int
	for _, cl := range c.Clusters {
		eps += len(cl.Endpoints)
	}
	if eps != 8 {
		t.Errorf("%d endpoints, want 2 per site (8)", eps)
	}
}

func TestRegionalDecisions(t *testing.T) {
	p := written(t)
	cfg := demoConfig(t, p)
	now := time.Now()
	state := func(down ...string) *regionstate.State {
		s := &regionstate.State{Version: envelope.Version{Epoch: 1, Sequence: 1}, Created: now}
		pl := regionstate.Platform{Name: Platform, Writer: WriterRegion, WriterEpoch: 1}
		for _, r := range Regions(Sites()) {
			healthy := true
			for _, d := range down {
				healthy = healthy && d != r
			}
			s.Regions = append(s.Regions, regionstate.Region{Name: r, Healthy: healthy, ConfigVersion: envelope.Version{Epoch: 1, Sequence: 1}})
			pl.Replicas = append(pl.Replicas, regionstate.Replica{Region: r, ObservedAt: now.Add(-time.Second)})
		}
		s.Platforms = []regionstate.Platform{pl}
		return s
	}
	c := func(name, method, path, tenant, route, target, reason string) routecheck.Case {
		return routecheck.Case{Name: name, Host: "192.0.2.10", Method: method, Path: path, Tenant: tenant, Region: "us",
			Expect: routecheck.Expect{Route: route, Target: target, Reason: reason}}
	}
	for _, tc := range []struct {
		name  string
		state *regionstate.State
		cases []routecheck.Case
	}{
		{"all regions healthy", state(), []routecheck.Case{
			c("fixed read", "GET", "/v1/items/1", FixedTenant, "get-item", "eu", "ok_primary"),
			c("primary_backup read", "GET", "/v1/items/1", BackupTenant, "get-item", "eu", "ok_primary"),
			c("fixed write", "PUT", "/v1/items/1", FixedTenant, "put-item", "eu", "ok_primary"),
			c("api-key read", "GET", "/v1/reports/7", BackupTenant, "get-report", "eu", "ok_primary"),
			c("no platform", "GET", "/whoami", "", "whoami", "-", "-"),
			c("unknown tenant", "GET", "/v1/items/1", "initech", "get-item", "503", "no_tenant"),
		}},
		{"eu down", state("eu"), []routecheck.Case{
			c("fixed read fails closed", "GET", "/v1/items/1", FixedTenant, "get-item", "503", "no_healthy_region"),
			c("primary_backup read moves", "GET", "/v1/items/1", BackupTenant, "get-item", "us", "ok_backup"),
			c("api-key read moves", "GET", "/v1/reports/7", BackupTenant, "get-report", "us", "ok_backup"),
			c("write stays with the writer", "PUT", "/v1/items/1", BackupTenant, "put-item", "503", "no_healthy_region"),
			c("no platform", "GET", "/whoami", "", "whoami", "-", "-"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := routecheck.New(demoConfig(t, p), tc.state, now)
			if err != nil {
				t.Fatal(err)
			}
			res, err := ch.Run(tc.cases, now)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if failed, err := routecheck.Write(&out, res); err != nil || failed > 0 {
				t.Errorf("%d failed (%v):\n%s", failed, err, out.String())
			}
		})
	}
	_ = cfg
}

func TestTokensAndKeysAuthenticate(t *testing.T) {
	p := written(t)
	cfg := demoConfig(t, p)
	set, err := auth.NewSet(cfg.AuthPolicies, nil, auth.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("auth policies of the demo: %v", err)
	}
	defer set.Close()
	for _, tenant := range []string{FixedTenant, BackupTenant} {
		tok, err := Token(p.Dir, tenant, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"Authorization": {"Bearer " + tok}}
		id, err := set.Policy("demo-jwt").Authenticate(h)
		if err != nil {
			t.Fatalf("JWT of %s refused: %v", tenant, err)
		}
		if id.Tenant != tenant || !id.HasScopes([]string{ScopeRead, ScopeWrite}) {
			t.Errorf("JWT identity %+v, want tenant %s with both scopes", id, tenant)
		}
		key, err := ReadSecret(p.APIKeys[tenant])
		if err != nil {
			t.Fatal(err)
		}
		id, err = set.Policy("demo-keys").Authenticate(http.Header{"X-Api-Key": {key}})
		if err != nil || id.Tenant != tenant {
			t.Errorf("API key of %s: identity %+v, err %v", tenant, id, err)
		}
	}
	readOnly, err := Token(p.Dir, FixedTenant, time.Minute, ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	id, err := set.Policy("demo-jwt").Authenticate(http.Header{"Authorization": {"Bearer " + readOnly}})
	if err != nil || id.HasScopes([]string{ScopeWrite}) || !id.HasScopes([]string{ScopeRead}) {
		t.Errorf("read-only token: identity %+v, err %v", id, err)
	}
	if _, err := set.Policy("demo-keys").Authenticate(http.Header{"X-Api-Key": {"not-a-demo-key-at-all"}}); err == nil {
		t.Error("an unknown API key was accepted")
	}
	if _, err := Token(p.Dir, "", time.Minute); err == nil {
		t.Error("a token without a tenant was minted")
	}
}

// TestControlPlaneTakesTheDemo starts the real control plane on the demo's
// control config (embedded store), submits the demo snapshot with the
// admin token, sets the writer with it, pushes lags with the monitor token
// and reads with the read token.
func TestControlPlaneTakesTheDemo(t *testing.T) {
	dir := t.TempDir()
	p, err := Write(dir, Options{ControlListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p.Control)
	if err != nil {
		t.Fatalf("control config: %v", err)
	}
	if got := cfg.Policy().Stages; len(got) != 3 || got[0].Match.Cohort != CanaryCohort || got[1].Match.Region != "eu" || got[2].Name != "all" {
		t.Errorf("stages %+v, want canary (cohort), eu (region), all", got)
	}
	if cfg.Regions.MinReadyPercent != 50 {
		t.Errorf("regions rule %+v", cfg.Regions)
	}
	srv, err := server.Open(cfg, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { _ = srv.Serve(ln, nil) }()
	base := "http://" + ln.Addr().String()
	call := func(method, path, tokenFile string, body []byte) (int, []byte) {
		t.Helper()
		tok, err := ReadSecret(tokenFile)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if strings.HasPrefix(string(body), "{") {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	snap, _ := os.ReadFile(p.Snapshot)
	if code, out := call("POST", "/v1/revisions?message=lab+demo", p.AdminToken, snap); code != http.StatusCreated {
		t.Fatalf("submit the demo: %d %s", code, out)
	}
	if code, out := call("POST", "/v1/revisions", p.ReadToken, snap); code != http.StatusForbidden {
		t.Errorf("submit with the read token: %d %s, want 403", code, out)
	}
	// With no nodes every stage is skipped: the revision becomes stable,
	// and with it the platform the writer and lag endpoints need.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out := call("GET", "/v1/rollouts/r1", p.ReadToken, nil)
		var ro struct{ State string }
		_ = json.Unmarshal(out, &ro)
		if code == http.StatusOK && ro.State == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout r1 not done after 30 s: %d %s", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, out := call("POST", "/v1/platforms/"+Platform+"/writer", p.AdminToken, Writer(WriterRegion, 0)); code != http.StatusOK {
		t.Fatalf("set the writer: %d %s", code, out)
	}
	if code, out := call("POST", "/v1/platforms/"+Platform+"/lag", p.MonitorToken, Lags(Regions(Sites()), time.Now())); code != http.StatusNoContent {
		t.Fatalf("push lags with the monitor token: %d %s", code, out)
	}
	code, out := call("GET", "/v1/platforms", p.ReadToken, nil)
	if code != http.StatusOK || !strings.Contains(string(out), `"`+WriterRegion+`"`) || !strings.Contains(string(out), Platform) {
		t.Errorf("platforms: %d %s", code, out)
	}
}

func TestWriteKeepsSecretsAndRefusesBadPlans(t *testing.T) {
	dir := t.TempDir()
	p1, err := Write(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, f := range []string{p1.SnapshotKey, p1.JWTKey, p1.AdminToken, p1.MonitorToken, p1.APIKeys[FixedTenant]} {
		before[f], _ = os.ReadFile(f)
	}
	tok, err := Token(dir, BackupTenant, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, Options{VIP4: netip.MustParseAddr("192.0.2.20")}); err != nil {
		t.Fatal(err)
	}
	for f, b := range before {
		if now, _ := os.ReadFile(f); !bytes.Equal(now, b) {
			t.Errorf("%s changed on the second Write", filepath.Base(f))
		}
	}
	cfg := demoConfig(t, p1)
	if cfg.L4.VIPs[0].Address != "192.0.2.20" {
		t.Errorf("second Write did not render the new VIP: %+v", cfg.L4.VIPs)
	}
	set, err := auth.NewSet(cfg.AuthPolicies, nil, auth.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if _, err := set.Policy("demo-jwt").Authenticate(http.Header{"Authorization": {"Bearer " + tok}}); err != nil {
		t.Errorf("a token minted before the second Write is refused: %v", err)
	}

	noCanary := Sites()
	noCanary[0].Cohort = ""
	dup := Sites()
	dup[1].ID = 1
	noUS := slices.Delete(Sites(), 2, 3)
	for name, o := range map[string]Options{
		"no canary":  {Sites: noCanary},
		"duplicate":  {Sites: dup},
		"no us":      {Sites: noUS},
		"v6 as VIP4": {VIP4: netip.MustParseAddr("2001:db8::1")},
	} {
		if _, err := Write(t.TempDir(), o); err == nil {
			t.Errorf("%s: Write accepted the plan", name)
		}
	}
}
