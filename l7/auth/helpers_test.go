package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "api"
)

// testKey is a signing key with its kid and algorithm.
type testKey struct {
	kid  string
	alg  jwa.SignatureAlgorithm
	priv crypto.Signer
	hmac []byte
}

var (
	keysOnce sync.Once
	kRSA     testKey // RS256, kid rsa-1
	kRSA2    testKey // RS256, kid rsa-2 (rotation)
	kEC      testKey // ES256, kid ec-1
	kEd      testKey // EdDSA, kid ed-1
	kHS      testKey // HS256, kid hs-1
	kOther   testKey // an RSA key no set holds, kid rsa-1 (same kid as kRSA)
)

func genKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		r1, _ := rsa.GenerateKey(rand.Reader, 2048)
		r2, _ := rsa.GenerateKey(rand.Reader, 2048)
		r3, _ := rsa.GenerateKey(rand.Reader, 2048)
		ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		_, ed, _ := ed25519.GenerateKey(rand.Reader)
		secret := make([]byte, 32)
		rand.Read(secret)
		kRSA = testKey{kid: "rsa-1", alg: jwa.RS256, priv: r1}
		kRSA2 = testKey{kid: "rsa-2", alg: jwa.RS256, priv: r2}
		kEC = testKey{kid: "ec-1", alg: jwa.ES256, priv: ec}
		kEd = testKey{kid: "ed-1", alg: jwa.EdDSA, priv: ed}
		kHS = testKey{kid: "hs-1", alg: jwa.HS256, hmac: secret}
		kOther = testKey{kid: "rsa-1", alg: jwa.RS256, priv: r3}
	})
}

// jwkOf is the public JWK of k, naming its kid and alg.
func jwkOf(t testing.TB, k testKey) jwk.Key {
	t.Helper()
	var raw any = k.hmac
	if k.priv != nil {
		raw = k.priv.Public()
	}
	j, err := jwk.FromRaw(raw)
	if err != nil {
		t.Fatal(err)
	}
	j.Set(jwk.KeyIDKey, k.kid)
	j.Set(jwk.AlgorithmKey, k.alg)
	return j
}

func jwksJSON(t testing.TB, ks ...testKey) []byte {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range ks {
		set.AddKey(jwkOf(t, k))
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeJWKS(t testing.TB, ks ...testKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, jwksJSON(t, ks...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// claims are valid ones for testIssuer/testAudience at now.
func claims(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": testAudience, "sub": "user-1", "jti": "j-1",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"tenant": "acme", "scope": "read write", "seller": 12345,
	}
}

// sign makes a token with jwx (an implementation independent of ours).
func sign(t testing.TB, k testKey, c map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	h.Set(jws.KeyIDKey, k.kid)
	h.Set(jws.TypeKey, "JWT")
	var key any = k.hmac
	if k.priv != nil {
		key = k.priv
	}
	tok, err := jws.Sign(payload, jws.WithKey(k.alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

func seg(v any) string {
	b, ok := v.([]byte)
	if !ok {
		b, _ = json.Marshal(v)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// forge assembles a token from a header, claims and a signature function.
func forge(hdr, c any, sigFn func(input []byte) []byte) string {
	input := seg(hdr) + "." + seg(c)
	var sig []byte
	if sigFn != nil {
		sig = sigFn([]byte(input))
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func bearer(tok string) http.Header {
	return http.Header{"Authorization": {"Bearer " + tok}}
}

func jwtConf(id string, algs []string, mod func(*snapshot.JWTPolicy)) snapshot.AuthPolicy {
	j := &snapshot.JWTPolicy{Issuer: testIssuer, Audiences: []string{"other", testAudience}, Algorithms: algs,
		JWKSRefreshMs: 300_000, JWKSMaxStaleMs: 3_600_000, UnknownKidRefetchMs: 30_000, LeewayMs: 30_000,
		Header: "Authorization", TenantClaim: "tenant", ScopesClaim: "scope"}
	if mod != nil {
		mod(j)
	}
	return snapshot.AuthPolicy{ID: id, Type: "jwt", JWT: j}
}

func quietOptions(now func() time.Time) Options {
	return Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: now}
}

func newSet(t testing.TB, ps []snapshot.AuthPolicy, prev *Set, opts Options) *Set {
	t.Helper()
	s, err := NewSet(ps, prev, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// jwksServer serves a key set and counts the requests it gets.
type jwksServer struct {
	*httptest.Server
	body    atomic.Pointer[[]byte]
	fetches atomic.Int64
	down    atomic.Bool
}

func newJWKSServer(t testing.TB, ks ...testKey) *jwksServer {
	s := &jwksServer{}
	s.serve(t, ks...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(t testing.TB, ks ...testKey) {
	b := jwksJSON(t, ks...)
	s.body.Store(&b)
}

// failure checks err is a 401 *Failure with the reason, and that neither
// the reason nor the challenge repeat any part of the token.
func failure(t *testing.T, err error, reason, tok string) *Failure {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("err = %v, want *Failure %q", err, reason)
	}
	if f.Status != 401 || f.Reason != reason {
		t.Fatalf("failure = %d %q, want 401 %q", f.Status, f.Reason, reason)
	}
	for _, part := range strings.Split(tok, ".") {
		if len(part) >= 8 && (strings.Contains(f.Reason, part) || strings.Contains(f.Challenge, part)) {
			t.Fatalf("failure %q leaks token contents", f.Challenge)
		}
	}
	return f
}

const (
	cryptoSHA256 = crypto.SHA256
	cryptoNone   = crypto.Hash(0)
)
