package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/region"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

var regionNames = []string{"eu-central", "eu-west", "us-east"}

// regionalLab is a proxy in eu-west in front of one real upstream per
// region (each answers with its region's name), with three tenants by API
// key: acme (fixed, eu-west), globex (primary_backup, eu-west then
// eu-central) and initech (weighted over us-east and eu-west).
type regionalLab struct {
	*lab
	log  *logSink
	live *region.Live
	cfg  *snapshot.Config
}

func newRegionalLab(t *testing.T) *regionalLab {
	l := newLab(t)
	rl := &regionalLab{lab: l, log: &logSink{}, live: region.NewLive(nil)}
	l.p = New(Options{AccessLog: rl.log, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Region: "eu-west", Regional: rl.live})
	c := l.config()
	accounts := snapshot.Cluster{Name: "accounts"}
	for _, r := range regionNames {
		u := startUpstream(t, r, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, r) })
		accounts.Endpoints = append(accounts.Endpoints, snapshot.Endpoint{Address: u.Addr(), Region: r})
	}
	plain := startUpstream(t, "plain", nil)
	c.Clusters = []snapshot.Cluster{accounts, clusterOf("plain", plain.Addr())}
	for _, r := range regionNames {
		c.Regions = append(c.Regions, snapshot.RegionDef{Name: r})
	}
	c.Platforms = []snapshot.Platform{{Name: "accounts-db", Clusters: []string{"accounts"}, ReplicaRegions: regionNames}}
	c.Tenants = []snapshot.Tenant{
		{ID: "acme", PrimaryRegion: "eu-west"},
		{ID: "globex", PrimaryRegion: "eu-west", AllowedRegions: []string{"eu-west", "eu-central"}, FailoverMode: "primary_backup", BackupRegion: "eu-central"},
		{ID: "initech", PrimaryRegion: "us-east", AllowedRegions: []string{"us-east", "eu-west"}, FailoverMode: "weighted", WeightedOptIn: true,
			Weights: map[string]int{"us-east": 1, "eu-west": 1}},
	}
	var keys []snapshot.APIKey
	for _, tn := range c.Tenants {
		sum := sha256.Sum256([]byte("key-" + tn.ID))
		keys = append(keys, snapshot.APIKey{ID: "k-" + tn.ID, SHA256: hex.EncodeToString(sum[:]), Tenant: tn.ID})
	}
	c.AuthPolicies = []snapshot.AuthPolicy{{ID: "keys", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{Keys: keys}}}
	read := getRoute("get-account", "/v1/accounts/{id}", "accounts")
	read.AuthPolicyID, read.Platform, read.MaxReplicaLagMs = "keys", "accounts-db", 500
	write := snapshot.Route{ID: "put-account", Host: "*", Methods: []string{"PUT"}, PathTemplate: "/v1/accounts/{id}",
		UpstreamCluster: "accounts", TimeoutMs: 2000, Idempotency: "key:Idempotency-Key", AuthPolicyID: "keys", Platform: "accounts-db"}
	c.Routes = []snapshot.Route{read, write, getRoute("status", "/status", "plain")}
	rl.cfg = c
	l.apply(c)
	return rl
}

// state is every region healthy, serving the active snapshot, replicas 10
// ms behind, accounts-db written in eu-west; change adjusts it.
func (rl *regionalLab) setState(seq uint64, change func(s *regionstate.State)) {
	now := time.Now()
	v := rl.p.Active().Snap.Version
	s := &regionstate.State{Version: envelope.Version{Epoch: 1, Sequence: seq}, Created: now}
	p := regionstate.Platform{Name: "accounts-db", Writer: "eu-west", WriterEpoch: 1}
	for _, r := range regionNames {
		s.Regions = append(s.Regions, regionstate.Region{Name: r, Healthy: true, ConfigVersion: envelope.Version{Epoch: v.Epoch, Sequence: v.Sequence}})
		p.Replicas = append(p.Replicas, regionstate.Replica{Region: r, LagMs: 10, ObservedAt: now})
	}
	s.Platforms = []regionstate.Platform{p}
	if change != nil {
		change(s)
	}
	rl.live.Set(s)
}

func (rl *regionalLab) do(t *testing.T, method, path, tenant, hint string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, rl.url("http", path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Api-Key", "key-"+tenant)
	}
	if hint != "" {
		req.Header.Set("X-Rampart-Region-Hint", hint)
	}
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// served asserts which region answered, or that the proxy failed closed
// with 503, the request id and no reason code anywhere in the response.
func (rl *regionalLab) served(t *testing.T, want, method, path, tenant, hint string) {
	t.Helper()
	code, body, h := rl.do(t, method, path, tenant, hint)
	if want != "503" {
		if code != 200 || body != want {
			t.Errorf("%s %s as %s (hint %q): %d %q, want 200 from %s", method, path, tenant, hint, code, body, want)
		}
		return
	}
	id := h.Get("X-Request-Id")
	if code != 503 || id == "" || !strings.Contains(body, id) {
		t.Errorf("%s %s as %s: %d %q (X-Request-Id %q), want 503 naming the request id", method, path, tenant, code, body, id)
	}
	for _, r := range region.Reasons() {
		for name, vs := range h {
			if strings.Contains(strings.ToLower(name+strings.Join(vs, " ")), r.String()) {
				t.Errorf("the 503 carries reason %s in header %s", r, name)
			}
		}
		if strings.Contains(body, r.String()) {
			t.Errorf("the 503 body %q carries reason %s", body, r)
		}
	}
}

// A running proxy with three regions of real upstreams: which region serves
// each request, failing closed, hints, weighted spread, writes, the metric
// and the access-log fields.
func TestRegionalRouting(t *testing.T) {
	rl := newRegionalLab(t)
	reg := rl.p.Metrics().Registry

	// No region state: every platform route fails closed; others serve.
	rl.served(t, "503", "GET", "/v1/accounts/1", "acme", "")
	if code, _, _ := rl.do(t, "GET", "/status", "", ""); code != 200 {
		t.Errorf("a route without a platform answered %d without a region state", code)
	}

	rl.setState(1, nil)
	rl.served(t, "eu-west", "GET", "/v1/accounts/1", "acme", "")
	rl.served(t, "eu-west", "GET", "/v1/accounts/1", "acme", "us-east") // a hint cannot widen
	rl.served(t, "eu-west", "GET", "/v1/accounts/1", "globex", "")
	rl.served(t, "eu-west", "PUT", "/v1/accounts/1", "acme", "")
	if code, _, _ := rl.do(t, "GET", "/v1/accounts/1", "", ""); code != 401 {
		t.Errorf("no credentials: %d, want 401 (auth runs before the regional stage)", code)
	}
	rl.served(t, "us-east", "GET", "/v1/accounts/1", "initech", "us-east")

	// Weighted reads spread over the allowed regions only; a hint outside
	// them is ignored.
	seen := map[string]int{}
	for range 40 {
		_, body, _ := rl.do(t, "GET", "/v1/accounts/2", "initech", "eu-central")
		seen[body]++
	}
	if seen["eu-central"] != 0 || seen["us-east"] == 0 || seen["eu-west"] == 0 || seen["us-east"]+seen["eu-west"] != 40 {
		t.Errorf("weighted reads with a widening hint went to %v, want both us-east and eu-west, never eu-central", seen)
	}

	// eu-west goes down: the fixed tenant fails closed, the primary_backup
	// one moves to its backup; the writer there makes writes fail closed.
	rl.setState(2, func(s *regionstate.State) { s.Regions[1].Healthy = false })
	rl.served(t, "503", "GET", "/v1/accounts/1", "acme", "")
	rl.served(t, "eu-central", "GET", "/v1/accounts/1", "globex", "")
	rl.served(t, "eu-central", "GET", "/v1/accounts/1", "globex", "eu-west")
	rl.served(t, "503", "PUT", "/v1/accounts/1", "acme", "")

	// eu-central's replica lags: the backup does not qualify either (the
	// reason is the primary's).
	rl.setState(3, func(s *regionstate.State) {
		s.Regions[1].Healthy = false
		s.Platforms[0].Replicas[0].LagMs = 900
	})
	rl.served(t, "503", "GET", "/v1/accounts/1", "globex", "")

	// The writer moves to eu-central: a write outside the primary without
	// the platform's guarantees fails closed.
	rl.setState(4, func(s *regionstate.State) { s.Platforms[0].Writer = "eu-central" })
	rl.served(t, "503", "PUT", "/v1/accounts/1", "globex", "")

	for reason, want := range map[string]float64{"state_unknown": 1, "ok_primary": 3, "hint_ignored": 42, "hint_narrowed": 1,
		"no_healthy_region": 3, "ok_backup": 1, "replica_lag": 0, "cross_region_write_unsafe": 1} {
		var got float64
		for _, route := range []string{"get-account", "put-account"} {
			got += metricValue(t, reg, "rampart_region_decisions_total", "route", route, "reason", reason)
		}
		if got != want {
			t.Errorf("rampart_region_decisions_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}

	// Every decision is in the access log with its target, reason code and
	// the two versions.
	type line struct {
		Route, Tenant string
		Status        int
		Regional      *struct {
			Target, ReasonCode, PolicyVersion, RegionStateVersion string
		}
	}
	var lines []line
	eventually(t, 30*time.Second, "the access log lines of every request", func() bool {
		lines = lines[:0]
		for _, raw := range strings.Split(strings.TrimSpace(rl.log.String()), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(raw), &m) != nil {
				continue
			}
			var l line
			l.Route, _ = m["route"].(string)
			l.Tenant, _ = m["tenant"].(string)
			if st, ok := m["status"].(float64); ok {
				l.Status = int(st)
			}
			if g, ok := m["regional"].(map[string]any); ok {
				s := func(k string) string { v, _ := g[k].(string); return v }
				l.Regional = &struct{ Target, ReasonCode, PolicyVersion, RegionStateVersion string }{
					s("target"), s("reason_code"), s("policy_version"), s("region_state_version")}
			}
			lines = append(lines, l)
		}
		return len(lines) >= 54
	})
	pv := rl.p.Active().Snap.Version.String()
	checked := 0
	for _, l := range lines {
		switch {
		case l.Route == "status" || l.Status == 401:
			if l.Regional != nil {
				t.Errorf("a request without a regional decision has regional fields: %+v", l)
			}
		case l.Regional == nil:
			t.Errorf("a %s request of %s has no regional fields", l.Route, l.Tenant)
		default:
			checked++
			g := l.Regional
			if g.PolicyVersion != pv || g.ReasonCode == "" || g.Target == "" || g.RegionStateVersion == "" {
				t.Errorf("regional fields %+v: want target, reason code, policy version %s and a state version", *g, pv)
			}
			if (l.Status == 503) != (g.Target == "503") {
				t.Errorf("status %d with target %q", l.Status, g.Target)
			}
		}
	}
	if first := lines[0].Regional; first == nil || first.ReasonCode != "state_unknown" || first.RegionStateVersion != "0.0" {
		t.Errorf("the first decision (no state) logged %+v, want state_unknown with region-state version 0.0", first)
	}
	if checked != 52 {
		t.Errorf("%d access-log lines with a regional decision, want 52", checked)
	}
}

// Only routes with a platform get the regional stage, after the header
// rules and the identity headers; a snapshot without regional keys has
// none.
func TestRegionalStageOnlyOnPlatformRoutes(t *testing.T) {
	rl := newRegionalLab(t)
	for _, rr := range rl.p.Active().routes {
		names := strings.Join(rr.chain.Names(), ",")
		want := rr.cfg.Platform != ""
		if strings.Contains(names, "regional") != want {
			t.Errorf("route %s: chain %s (regional stage wanted: %v)", rr.cfg.ID, names, want)
		}
		if want && !strings.HasSuffix(names, "identity_headers,regional,forward") {
			t.Errorf("route %s: chain %s, want the regional stage after identity_headers and before forward", rr.cfg.ID, names)
		}
	}
	l := newLab(t)
	u := startUpstream(t, "app", nil)
	c := l.config(u.Addr())
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	for _, rr := range l.p.Active().routes {
		if names := strings.Join(rr.chain.Names(), ","); strings.Contains(names, "regional") {
			t.Errorf("a snapshot without regional keys: route %s has chain %s", rr.cfg.ID, names)
		}
	}
}
