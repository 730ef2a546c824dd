package proxy

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// issuer signs EdDSA tokens and publishes its key in a JWKS file.
type issuer struct {
	priv ed25519.PrivateKey
	file string
}

func newIssuer(t testing.TB) *issuer {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "OKP", "crv": "Ed25519", "kid": "k1", "alg": "EdDSA", "use": "sig",
		"x": base64.RawURLEncoding.EncodeToString(pub)}}})
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	return &issuer{priv: priv, file: file}
}

func (is *issuer) token(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": "k1"})
	base := map[string]any{"iss": "https://id.test/", "aud": "api", "sub": "user-1",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		base[k] = v
	}
	p, _ := json.Marshal(base)
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	return signing + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(is.priv, []byte(signing)))
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// policyLab: /jwt needs a JWT with scope users:read, /key an API key,
// /quota a JWT and a quota of 3 per tenant, /open nothing.
func policyLab(t *testing.T) (*lab, *testUpstream, *issuer) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	is := newIssuer(t)
	c := l.config(up.Addr())
	c.AuthPolicies = []snapshot.AuthPolicy{
		{ID: "jwt", Type: "jwt", JWT: &snapshot.JWTPolicy{Issuer: "https://id.test/", Audiences: []string{"api"},
			Algorithms: []string{"EdDSA"}, JWKSFile: is.file}},
		{ID: "keys", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{Keys: []snapshot.APIKey{
			{ID: "partner-1", SHA256: sha("s3cret-key-1"), Tenant: "acme", Scopes: []string{"files:read"}}}}},
	}
	c.QuotaPolicies = []snapshot.QuotaPolicy{{ID: "three", Key: []string{"tenant"}, RatePerSecond: 0.001, Burst: 3}}
	jwtRoute := getRoute("jwt", "/jwt", "app")
	jwtRoute.AuthPolicyID, jwtRoute.RequiredScopes = "jwt", []string{"users:read"}
	jwtRoute.Headers = &snapshot.HeaderRules{
		Request:  snapshot.HeaderOps{Set: map[string]string{"X-Api-Version": "2"}, Remove: []string{"Cookie"}},
		Response: snapshot.HeaderOps{Add: map[string]string{"Cache-Control": "no-store"}},
	}
	keyRoute := getRoute("key", "/key", "app")
	keyRoute.AuthPolicyID = "keys"
	quotaRoute := getRoute("quota", "/quota", "app")
	quotaRoute.AuthPolicyID, quotaRoute.QuotaPolicyID = "jwt", "three"
	c.Routes = []snapshot.Route{jwtRoute, keyRoute, quotaRoute, getRoute("open", "/open", "app")}
	l.apply(c)
	return l, up, is
}

func do(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestJWTRouteAuthenticatesAndPassesIdentity(t *testing.T) {
	l, up, is := policyLab(t)
	url := l.url("http", "/jwt")
	good := is.token(map[string]any{"scope": "users:read other", "tenant": "acme", "jti": "t-1"})
	resp := do(t, url, map[string]string{"Authorization": "Bearer " + good, "X-Rampart-Tenant": "spoofed",
		"X-Rampart-Subject": "admin", "Cookie": "session=1"})
	if resp.StatusCode != 200 {
		t.Fatalf("valid token: %d", resp.StatusCode)
	}
	in := up.Last().Header
	if in.Get("X-Rampart-Tenant") != "acme" || in.Get("X-Rampart-Subject") != "user-1" || in.Get("X-Rampart-Scopes") != "users:read other" {
		t.Errorf("identity headers upstream: %v", in)
	}
	if in.Get("Authorization") == "" || in.Get("Cookie") != "" || in.Get("X-Api-Version") != "2" {
		t.Errorf("request header rules: %v", in)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("response header rules: %v", resp.Header)
	}
	for name, tc := range map[string]struct {
		hdr    map[string]string
		status int
		chall  string
	}{
		"missing":      {nil, 401, `Bearer realm="rampart"`},
		"garbage":      {map[string]string{"Authorization": "Bearer abc.def.ghi"}, 401, `error="invalid_token"`},
		"expired":      {map[string]string{"Authorization": "Bearer " + is.token(map[string]any{"scope": "users:read", "exp": time.Now().Add(-time.Hour).Unix()})}, 401, "invalid_token"},
		"wrong aud":    {map[string]string{"Authorization": "Bearer " + is.token(map[string]any{"scope": "users:read", "aud": "other"})}, 401, "invalid_token"},
		"no scope":     {map[string]string{"Authorization": "Bearer " + is.token(map[string]any{"scope": "other"})}, 403, `error="insufficient_scope"`},
		"unknown kind": {map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, 401, "Bearer"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := do(t, url, tc.hdr)
			if resp.StatusCode != tc.status || !strings.Contains(resp.Header.Get("WWW-Authenticate"), tc.chall) {
				t.Fatalf("%d %q, want %d with %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tc.status, tc.chall)
			}
		})
	}
	if up.Count() != 1 {
		t.Fatalf("refused requests reached the upstream (%d)", up.Count())
	}
	if testutil.ToFloat64(l.p.metrics.faults.WithLabelValues("jwt", "client")) < 6 {
		t.Error("auth failures should be the client's fault")
	}
}

func TestOpenRouteStripsSpoofedIdentity(t *testing.T) {
	l, up, _ := policyLab(t)
	do(t, l.url("http", "/open"), map[string]string{"X-Rampart-Tenant": "evil", "X-Rampart-Key-Id": "k"})
	if h := up.Last().Header; h.Get("X-Rampart-Tenant") != "" || h.Get("X-Rampart-Key-Id") != "" {
		t.Fatalf("spoofed identity reached the upstream: %v", h)
	}
}

func TestAPIKeysAndTheDenyChannel(t *testing.T) {
	l, up, is := policyLab(t)
	url := l.url("http", "/key")
	if r := do(t, url, map[string]string{"X-Api-Key": "s3cret-key-1"}); r.StatusCode != 200 || up.Last().Header.Get("X-Rampart-Key-Id") != "partner-1" {
		t.Fatalf("right key: %d %v", r.StatusCode, up.Last().Header)
	}
	if r := do(t, url, map[string]string{"X-Api-Key": "wrong"}); r.StatusCode != 401 {
		t.Fatalf("wrong key: %d", r.StatusCode)
	}
	// Revoke the key id, then the token's jti, then the client address.
	list := func(seq uint64, entries ...deny.Entry) *deny.List {
		file, err := deny.Build(entries, seq, l.priv, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		dl, err := deny.Parse(file, l.pub)
		if err != nil {
			t.Fatal(err)
		}
		return dl
	}
	exp := time.Now().Add(time.Hour)
	l.p.SetDenyList(list(1, deny.Entry{Kind: deny.KindAPIKeyID, Value: "partner-1", ExpiresAt: exp}))
	if r := do(t, url, map[string]string{"X-Api-Key": "s3cret-key-1"}); r.StatusCode != 403 {
		t.Fatalf("revoked key: %d", r.StatusCode)
	}
	tok := is.token(map[string]any{"scope": "users:read", "jti": "stolen"})
	l.p.SetDenyList(list(2, deny.Entry{Kind: deny.KindJTI, Value: "stolen", ExpiresAt: exp}))
	if r := do(t, l.url("http", "/jwt"), map[string]string{"Authorization": "Bearer " + tok}); r.StatusCode != 403 {
		t.Fatalf("revoked jti: %d", r.StatusCode)
	}
	l.p.SetDenyList(list(3, deny.Entry{Kind: deny.KindCIDR, Value: "127.0.0.0/8", ExpiresAt: exp}))
	if r := do(t, l.url("http", "/open"), nil); r.StatusCode != 403 {
		t.Fatalf("denied address: %d", r.StatusCode)
	}
	l.p.SetDenyList(list(4))
	if r := do(t, l.url("http", "/open"), nil); r.StatusCode != 200 {
		t.Fatalf("after the list was emptied: %d", r.StatusCode)
	}
	if testutil.ToFloat64(l.p.metrics.stage.Denied.WithLabelValues("cidr")) != 1 || testutil.ToFloat64(l.p.metrics.stage.Denied.WithLabelValues("identity")) != 2 {
		t.Error("denies not counted")
	}
}

func TestQuotaPerTenant(t *testing.T) {
	l, up, is := policyLab(t)
	url := l.url("http", "/quota")
	acme := "Bearer " + is.token(map[string]any{"tenant": "acme"})
	globex := "Bearer " + is.token(map[string]any{"tenant": "globex"})
	for i := 0; i < 3; i++ {
		r := do(t, url, map[string]string{"Authorization": acme})
		if r.StatusCode != 200 || r.Header.Get("RateLimit-Limit") != "3" {
			t.Fatalf("request %d: %d %v", i, r.StatusCode, r.Header)
		}
	}
	r := do(t, url, map[string]string{"Authorization": acme})
	if r.StatusCode != 429 || r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("4th request: %d %v", r.StatusCode, r.Header)
	}
	if r := do(t, url, map[string]string{"Authorization": globex}); r.StatusCode != 200 {
		t.Fatalf("another tenant: %d", r.StatusCode)
	}
	if up.Count() != 4 {
		t.Fatalf("upstream saw %d, want 4", up.Count())
	}
	if testutil.ToFloat64(l.p.metrics.quota.WithLabelValues("three", "limited")) != 1 {
		t.Error("limited decision not counted")
	}
}
