package stage

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/headerrule"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

const apiKey = "s3cret-key-1"

// testEnv compiles a snapshot with four routes: /open (nothing), /key (an
// API key), /scoped (a key and a scope it lacks), /all (key, quota of 2
// per tenant, header rules).
func testEnv(t *testing.T) (*Env, []*Route) {
	t.Helper()
	sum := sha256.Sum256([]byte(apiKey))
	c := &snapshot.Config{
		Version:   snapshot.Version{Epoch: 1, Sequence: 1},
		Listeners: []snapshot.Listener{{Name: "http", Address: "127.0.0.1:0"}},
		Clusters:  []snapshot.Cluster{{Name: "app", Endpoints: []snapshot.Endpoint{{Address: "192.0.2.1:80"}}}},
		AuthPolicies: []snapshot.AuthPolicy{{ID: "keys", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{Keys: []snapshot.APIKey{
			{ID: "partner-1", SHA256: hex.EncodeToString(sum[:]), Tenant: "acme", Scopes: []string{"files:read"}}}}}},
		QuotaPolicies: []snapshot.QuotaPolicy{{ID: "two", Key: []string{"tenant"}, RatePerSecond: 0.001, Burst: 2}},
	}
	rt := func(id, path string, f func(*snapshot.Route)) snapshot.Route {
		r := snapshot.Route{ID: id, Host: "*", Methods: []string{"GET"}, PathTemplate: path, UpstreamCluster: "app", TimeoutMs: 1000}
		if f != nil {
			f(&r)
		}
		return r
	}
	c.Routes = []snapshot.Route{
		rt("open", "/open", nil),
		rt("key", "/key", func(r *snapshot.Route) { r.AuthPolicyID = "keys" }),
		rt("scoped", "/scoped", func(r *snapshot.Route) { r.AuthPolicyID, r.RequiredScopes = "keys", []string{"files:write"} }),
		rt("all", "/all", func(r *snapshot.Route) {
			r.AuthPolicyID, r.RequiredScopes, r.QuotaPolicyID = "keys", []string{"files:read"}, "two"
			r.Headers = &snapshot.HeaderRules{Request: snapshot.HeaderOps{Set: map[string]string{"X-Env": "test"}}}
		}),
	}
	priv, pub := testKeys(t)
	file, err := snapshot.Build(c, priv, time.Now())
	if err != nil {
		t.Fatalf("build snapshot: %v", err)
	}
	s, err := snapshot.Parse(file, pub)
	if err != nil {
		t.Fatalf("parse snapshot: %v", err)
	}
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	as, err := auth.NewSet(s.Config.AuthPolicies, nil, auth.Options{Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Close)
	ql, err := quota.New(s.Config.QuotaPolicies, "", nil, quota.Options{Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ql.Close() })
	table, err := route.NewTable(s.Config.Routes)
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Snap: s, Log: lg, Metrics: NewMetrics(prometheus.NewRegistry()), Deny: &atomic.Pointer[deny.List]{},
		Auth: as, Quota: ql, Table: table, Identity: NewIdentityKeys(s.Config.IdentityHeaders)}
	var routes []*Route
	for i := range s.Config.Routes {
		r := &s.Config.Routes[i]
		rules, err := headerrule.Compile(r.Headers)
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, &Route{Config: r, Index: int32(i), Rules: rules})
	}
	return env, routes
}

func testKeys(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	privPEM, pubPEM, err := snapshot.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, _ := snapshot.ParsePrivateKey(privPEM)
	p, _ := snapshot.ParsePublicKey(pubPEM)
	return k, p
}

// serve runs one GET through the screen and the route's chain, as the
// proxy does up to forward.
func serve(t *testing.T, env *Env, r *Route, hdr map[string]string) (*httptest.ResponseRecorder, *Exchange) {
	t.Helper()
	chain, err := Compile(r, env)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://localhost"+r.Config.PathTemplate, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	var m route.Match
	env.Table.Lookup("localhost", "GET", r.Config.PathTemplate, &m)
	x := &Exchange{W: w, R: req, Log: &accesslog.Entry{ReqID: "req-1"}, Route: r.Config, Match: &m}
	if Screen(env).Run(x) && chain.Run(x) {
		w.WriteHeader(299) // what forward would do: the chain let it through
	}
	return w, x
}

// A route's chain holds only the stages it uses, in the fixed order.
func TestChainHoldsOnlyTheStagesARouteUses(t *testing.T) {
	env, routes := testEnv(t)
	want := map[string][]string{
		"open":   {},
		"key":    {"auth", "deny_identity", "identity_headers"},
		"scoped": {"auth", "deny_identity", "scopes", "identity_headers"},
		"all":    {"auth", "deny_identity", "scopes", "quota", "headers", "identity_headers"},
	}
	for _, r := range routes {
		c, err := Compile(r, env)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Names(); !slices.Equal(got, want[r.Config.ID]) {
			t.Errorf("route %s: chain %v, want %v", r.Config.ID, got, want[r.Config.ID])
		}
	}
	if got := Screen(env).Names(); !slices.Equal(got, []string{"deny_screen"}) {
		t.Errorf("screen chain %v", got)
	}
}

// A build-time error names the route and the stage.
func TestCompileErrorNamesRouteAndStage(t *testing.T) {
	env, routes := testEnv(t)
	r := *routes[1]
	cfg := *r.Config
	cfg.AuthPolicyID = "missing"
	r.Config = &cfg
	_, err := Compile(&r, env)
	if err == nil || !strings.Contains(err.Error(), `route "key": stage auth: auth policy "missing" was not built`) {
		t.Fatalf("error %v", err)
	}
}

func TestStagesRefuseAndPass(t *testing.T) {
	env, routes := testEnv(t)
	byID := map[string]*Route{}
	for _, r := range routes {
		byID[r.Config.ID] = r
	}
	// The screen strips identity headers a client sends, on every route.
	w, x := serve(t, env, byID["open"], map[string]string{"X-Rampart-Tenant": "evil"})
	if w.Code != 299 || x.R.Header.Get("X-Rampart-Tenant") != "" {
		t.Fatalf("open: %d, tenant header %q", w.Code, x.R.Header.Get("X-Rampart-Tenant"))
	}
	// No key: 401 from auth, a security event and the client's fault.
	w, x = serve(t, env, byID["key"], nil)
	if w.Code != 401 || !x.Log.Security || x.Fault != FaultClient || !strings.Contains(w.Body.String(), "(request id req-1)") {
		t.Fatalf("no key: %d %q security=%v fault=%q", w.Code, w.Body.String(), x.Log.Security, x.Fault)
	}
	if n := testutil.ToFloat64(env.Metrics.AuthFailures); n != 1 {
		t.Fatalf("auth failures %v, want 1", n)
	}
	key := map[string]string{"X-Api-Key": apiKey}
	// A scope the key lacks: 403 with the insufficient_scope challenge.
	w, _ = serve(t, env, byID["scoped"], key)
	if w.Code != 403 || !strings.Contains(w.Header().Get("WWW-Authenticate"), `scope="files:write"`) {
		t.Fatalf("scoped: %d, challenge %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	// Key, scope, quota of 2, header rules, and the identity headers from
	// the verified identity.
	for i := 0; i < 2; i++ {
		w, x = serve(t, env, byID["all"], key)
		if w.Code != 299 || x.R.Header.Get("X-Rampart-Tenant") != "acme" || x.R.Header.Get("X-Env") != "test" ||
			x.Log.Tenant != "acme" || x.Log.KeyID != "partner-1" {
			t.Fatalf("all #%d: %d, headers %v, log tenant %q key %q", i, w.Code, x.R.Header, x.Log.Tenant, x.Log.KeyID)
		}
	}
	w, _ = serve(t, env, byID["all"], key)
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("over quota: %d, headers %v", w.Code, w.Header())
	}
}
