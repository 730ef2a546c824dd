package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func hashOf(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

const (
	keyA = "rk_live_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	keyB = "rk_live_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	keyC = "rk_live_cccccccccccccccccccccccccccccccccccccccc"
)

func apiKeyPolicies() []snapshot.AuthPolicy {
	return []snapshot.AuthPolicy{
		{ID: "k1", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{Header: "X-Api-Key", Keys: []snapshot.APIKey{
			{ID: "key-a", SHA256: hashOf(keyA), Tenant: "t1", Scopes: []string{"read", "write"}},
			{ID: "key-b", SHA256: strings.ToUpper(hashOf(keyB)), Tenant: "t2"},
		}}},
		{ID: "k2", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{Header: "x-other-key", Keys: []snapshot.APIKey{
			{ID: "key-c", SHA256: hashOf(keyC), Tenant: "t3"},
		}}},
	}
}

func TestAPIKey(t *testing.T) {
	set := newSet(t, apiKeyPolicies(), nil, quietOptions(nil))
	tests := []struct {
		name, policy string
		h            http.Header
		keyID        string // "" fails
		reason       string
	}{
		{"right key", "k1", http.Header{"X-Api-Key": {keyA}}, "key-a", ""},
		{"second key", "k1", http.Header{"X-Api-Key": {keyB}}, "key-b", ""},
		{"own header name", "k2", http.Header{"X-Other-Key": {keyC}}, "key-c", ""},
		{"wrong key", "k1", http.Header{"X-Api-Key": {keyA + "x"}}, "", "invalid API key"},
		{"key's hash as key", "k1", http.Header{"X-Api-Key": {hashOf(keyA)}}, "", "invalid API key"},
		{"key of another policy", "k1", http.Header{"X-Api-Key": {keyC}}, "", "invalid API key"},
		{"right key in another policy's header", "k2", http.Header{"X-Api-Key": {keyC}}, "", "missing API key"},
		{"missing header", "k1", http.Header{}, "", "missing API key"},
		{"empty header", "k1", http.Header{"X-Api-Key": {""}}, "", "missing API key"},
		{"two keys", "k1", http.Header{"X-Api-Key": {keyA, keyB}}, "", "more than one API key"},
		{"oversized", "k1", http.Header{"X-Api-Key": {strings.Repeat("k", MaxAPIKeyBytes+1)}}, "", "invalid API key"},
		{"long but bounded", "k1", http.Header{"X-Api-Key": {strings.Repeat("k", MaxAPIKeyBytes)}}, "", "invalid API key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := set.Policy(tc.policy).Authenticate(tc.h)
			if tc.keyID == "" {
				var f *Failure
				if !errors.As(err, &f) || f.Status != 401 || f.Reason != tc.reason || !strings.HasPrefix(f.Challenge, `ApiKey realm="rampart"`) {
					t.Fatalf("err = %v, want 401 %q", err, tc.reason)
				}
				if strings.Contains(f.Reason+f.Challenge, "rk_live") {
					t.Fatalf("failure leaks the key: %q", f.Challenge)
				}
				if missing := strings.HasPrefix(tc.reason, "missing"); missing == strings.Contains(f.Challenge, "error=") {
					t.Fatalf("challenge %q", f.Challenge)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id.KeyID != tc.keyID || id.PolicyID != tc.policy || id.Subject != "" {
				t.Fatalf("identity %+v", id)
			}
		})
	}
	id, _ := set.Policy("k1").Authenticate(http.Header{"X-Api-Key": {keyA}})
	if id.Tenant != "t1" || !slices.Equal(id.Scopes, []string{"read", "write"}) || !id.HasScopes([]string{"read"}) || id.HasScopes([]string{"admin"}) {
		t.Fatalf("identity %+v", id)
	}
	if _, ok := id.Claim("tenant"); ok {
		t.Fatal("an API key identity has claims")
	}
}

func TestNewSetErrors(t *testing.T) {
	genKeys(t)
	file := writeJWKS(t, kRSA)
	bad := func(mod func(*snapshot.JWTPolicy)) snapshot.AuthPolicy {
		return jwtConf("p", []string{"RS256"}, func(j *snapshot.JWTPolicy) { j.JWKSFile = file; mod(j) })
	}
	tests := []struct {
		name string
		ps   []snapshot.AuthPolicy
		err  string
	}{
		{"duplicate id", append(apiKeyPolicies(), apiKeyPolicies()[0]), "duplicate id"},
		{"alg none", []snapshot.AuthPolicy{bad(func(j *snapshot.JWTPolicy) { j.Algorithms = []string{"none"} })}, "not supported"},
		{"no algorithms", []snapshot.AuthPolicy{bad(func(j *snapshot.JWTPolicy) { j.Algorithms = nil })}, "at least one algorithm"},
		{"url and file", []snapshot.AuthPolicy{bad(func(j *snapshot.JWTPolicy) { j.JWKSURL = "http://x" })}, "exactly one"},
		{"HMAC from a URL", []snapshot.AuthPolicy{bad(func(j *snapshot.JWTPolicy) {
			j.JWKSFile, j.JWKSURL, j.Algorithms = "", "http://x", []string{"HS256"}
		})}, "never fetched"},
		{"no issuer", []snapshot.AuthPolicy{bad(func(j *snapshot.JWTPolicy) { j.Issuer = "" })}, "issuer"},
		{"bad key hash", []snapshot.AuthPolicy{{ID: "k", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{
			Keys: []snapshot.APIKey{{ID: "x", SHA256: "abc"}}}}}, "64 hex"},
		{"type without block", []snapshot.AuthPolicy{{ID: "k", Type: "jwt"}}, "needs its own block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSet(tc.ps, nil, quietOptions(nil))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
