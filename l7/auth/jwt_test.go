package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// fileSet is a Set of file-keyed JWT policies at a fake time.
func fileSet(t *testing.T, clk *clock) *Set {
	genKeys(t)
	asym := writeJWKS(t, kRSA, kEC, kEd)
	file := func(p string) func(*snapshot.JWTPolicy) {
		return func(j *snapshot.JWTPolicy) { j.JWKSFile = p }
	}
	return newSet(t, []snapshot.AuthPolicy{
		jwtConf("rs", []string{"RS256"}, file(asym)),
		jwtConf("rs-multi", []string{"RS256", "RS384"}, file(asym)),
		jwtConf("rs-hs", []string{"RS256", "HS256"}, file(asym)), // validation forbids this mix; keys still refuse
		jwtConf("es", []string{"ES256"}, file(asym)),
		jwtConf("ed", []string{"EdDSA"}, file(asym)),
		jwtConf("hs", []string{"HS256"}, file(writeJWKS(t, kHS))),
		jwtConf("rs-at", []string{"RS256"}, func(j *snapshot.JWTPolicy) { // RFC 9068 access tokens only
			j.JWKSFile = asym
			j.AllowedTypes, j.RequireType = []string{"at+jwt"}, true
		}),
	}, nil, quietOptions(clk.Now))
}

func TestJWTAttacks(t *testing.T) {
	clk := newClock()
	set := fileSet(t, clk)
	now := clk.Now()
	valid := claims(now)
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for n, x := range valid {
			c[n] = x
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(kRSA.priv.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hmacWith := func(secret []byte) func([]byte) []byte {
		return func(in []byte) []byte { m := hmac.New(sha256.New, secret); m.Write(in); return m.Sum(nil) }
	}
	good := sign(t, kRSA, valid)
	parts := strings.Split(good, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	big := strings.Repeat("A", MaxTokenBytes)

	tests := []struct {
		name, policy string
		h            http.Header
		reason       string
	}{
		{"alg none unsigned", "rs", bearer(forge(map[string]any{"alg": "none", "kid": "rsa-1"}, valid, nil)), "algorithm not allowed"},
		{"alg None", "rs", bearer(forge(map[string]any{"alg": "None"}, valid, nil)), "algorithm not allowed"},
		{"alg none with a signature", "rs", bearer(forge(map[string]any{"alg": "none"}, valid, hmacWith(nil))), "algorithm not allowed"},
		{"HS256 with the RSA public key as secret", "rs", bearer(forge(map[string]any{"alg": "HS256", "kid": "rsa-1"}, valid, hmacWith(pubPEM))), "algorithm not allowed"},
		{"HS256 with the RSA public key, HS256 allowed", "rs-hs", bearer(forge(map[string]any{"alg": "HS256", "kid": "rsa-1"}, valid, hmacWith(pubPEM))), "unknown signing key"},
		{"HS256 with the RSA public key DER, no kid", "rs-hs", bearer(forge(map[string]any{"alg": "HS256"}, valid, hmacWith(pubDER))), "unknown signing key"},
		{"alg not pinned (valid ES256 signature)", "rs", bearer(sign(t, kEC, valid)), "algorithm not allowed"},
		{"alg not pinned (valid EdDSA signature)", "rs", bearer(sign(t, kEd, valid)), "algorithm not allowed"},
		{"key's own alg differs", "rs-multi", bearer(sign(t, testKey{kid: "rsa-1", alg: jwa.RS384, priv: kRSA.priv}, valid)), "unknown signing key"},
		{"ES256 kid pointing at the RSA key", "es", bearer(sign(t, testKey{kid: "rsa-1", alg: jwa.ES256, priv: kEC.priv}, valid)), "unknown signing key"},
		{"expired beyond leeway", "rs", bearer(sign(t, kRSA, with("exp", now.Add(-31*time.Second).Unix()))), "token expired"},
		{"no exp", "rs", bearer(sign(t, kRSA, with("exp", nil))), "token has no expiry"},
		{"exp not a number", "rs", bearer(sign(t, kRSA, with("exp", "9999999999"))), "malformed claims"},
		{"not yet valid", "rs", bearer(sign(t, kRSA, with("nbf", now.Add(time.Minute).Unix()))), "token not yet valid"},
		{"iat in the future", "rs", bearer(sign(t, kRSA, with("iat", now.Add(time.Minute).Unix()))), "token issued in the future"},
		{"wrong aud", "rs", bearer(sign(t, kRSA, with("aud", "api2"))), "wrong audience"},
		{"wrong aud array", "rs", bearer(sign(t, kRSA, with("aud", []string{"x", "y"}))), "wrong audience"},
		{"no aud", "rs", bearer(sign(t, kRSA, with("aud", nil))), "wrong audience"},
		{"wrong iss", "rs", bearer(sign(t, kRSA, with("iss", "https://issuer.test/"))), "wrong issuer"},
		{"no iss", "rs", bearer(sign(t, kRSA, with("iss", nil))), "wrong issuer"},
		{"duplicate sub", "rs", bearer(forgeRaw(t, kRSA, `{"iss":"`+testIssuer+`","aud":"api","exp":9999999999,"sub":"a","sub":"b"}`)), "malformed claims"},
		{"control character in sub", "rs", bearer(sign(t, kRSA, with("sub", "a\r\nX-Evil: 1"))), "malformed claims"},
		{"tampered payload", "rs", bearer(parts[0] + "." + seg(with("sub", "admin")) + "." + parts[2]), "invalid signature"},
		{"tampered signature", "rs", bearer(parts[0] + "." + parts[1] + "." + flip(parts[2], 10)), "invalid signature"},
		{"signature from another key with the same kid", "rs", bearer(sign(t, kOther, valid)), "invalid signature"},
		{"embedded jwk header is ignored", "rs", bearer(embeddedJWK(t, valid)), "invalid signature"},
		{"signature stripped", "rs", bearer(parts[0] + "." + parts[1] + "."), "invalid signature"},
		{"unknown kid (file)", "rs", bearer(sign(t, testKey{kid: "nope", alg: jwa.RS256, priv: kRSA.priv}, valid)), "unknown signing key"},
		{"crit header", "rs", bearer(forge(map[string]any{"alg": "RS256", "kid": "rsa-1", "crit": []string{"exp"}, "exp": 1}, valid, nil)), "unsupported token header"},
		{"typ of another kind of token", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"secevent+jwt"}`, valid)), "token type not allowed"},
		{"typ JOSE", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"JOSE"}`, valid)), "token type not allowed"},
		{"typ empty", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":""}`, valid)), "token type not allowed"},
		{"typ with a parameter", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"application/jwt;x=1"}`, valid)), "token type not allowed"},
		{"typ application/ prefix twice", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"application/application/jwt"}`, valid)), "token type not allowed"},
		{"typ not a string", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":1}`, valid)), "malformed token"},
		{"duplicate typ", "rs", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"secevent+jwt","typ":"JWT"}`, valid)), "malformed token"},
		{"typ JWT where only at+jwt is allowed", "rs-at", bearer(sign(t, kRSA, valid)), "token type not allowed"},
		{"no typ where typ is required", "rs-at", bearer(rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1"}`, valid)), "token type not allowed"},
		{"duplicate alg", "rs", bearer(seg([]byte(`{"alg":"RS256","alg":"none"}`)) + "." + parts[1] + "." + parts[2]), "malformed token"},
		{"garbage", "rs", bearer("garbage"), "malformed token"},
		{"two segments", "rs", bearer(parts[0] + "." + parts[1]), "malformed token"},
		{"four segments", "rs", bearer(good + ".x"), "malformed token"},
		{"empty header segment", "rs", bearer("." + parts[1] + "." + parts[2]), "malformed token"},
		{"padded base64", "rs", bearer(parts[0] + "=." + parts[1] + "." + parts[2]), "malformed token"},
		{"header not JSON", "rs", bearer(seg([]byte("RS256")) + "." + parts[1] + "." + parts[2]), "malformed token"},
		{"header a JSON array", "rs", bearer(seg([]string{"alg"}) + "." + parts[1] + "." + parts[2]), "malformed token"},
		{"bearer without token", "rs", http.Header{"Authorization": {"Bearer"}}, "malformed token"},
		{"bearer with spaces only", "rs", http.Header{"Authorization": {"Bearer    "}}, "malformed token"},
		{"oversized token", "rs", bearer(big + "." + big + "." + big), "token too large"},
		{"two Authorization headers", "rs", http.Header{"Authorization": {"Bearer " + good, "Bearer " + good}}, "more than one credential header"},
		{"missing header", "rs", http.Header{}, "missing bearer token"},
		{"empty header", "rs", http.Header{"Authorization": {""}}, "missing bearer token"},
		{"another scheme", "rs", http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, "missing bearer token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, err := set.Policy(tc.policy).Authenticate(tc.h)
			if err == nil {
				t.Fatalf("authenticated %+v", id)
			}
			f := failure(t, err, tc.reason, strings.TrimPrefix(tc.h.Get("Authorization"), "Bearer "))
			missing := strings.HasPrefix(tc.reason, "missing")
			if missing != !strings.Contains(f.Challenge, "error=") || !strings.HasPrefix(f.Challenge, `Bearer realm="rampart"`) {
				t.Fatalf("challenge %q (missing credential: %v)", f.Challenge, missing)
			}
		})
	}
}

// forgeRaw signs raw claims JSON with k.
func forgeRaw(t *testing.T, k testKey, payload string) string {
	return forge(map[string]any{"alg": "RS256", "kid": k.kid}, []byte(payload), func(in []byte) []byte {
		sum := sha256.Sum256(in)
		sig, err := k.priv.Sign(rand.Reader, sum[:], cryptoSHA256)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	})
}

// rsaWithHeader signs claims with kRSA under a raw JOSE header.
func rsaWithHeader(t *testing.T, hdr string, c map[string]any) string {
	return forge([]byte(hdr), c, func(in []byte) []byte {
		sum := sha256.Sum256(in)
		sig, err := kRSA.priv.Sign(rand.Reader, sum[:], cryptoSHA256)
		if err != nil {
			t.Fatal(err)
		}
		return sig
	})
}

// embeddedJWK is a token signed by a key of the attacker's, naming the
// real kid and carrying the attacker's public key in a "jwk" header.
func embeddedJWK(t *testing.T, c map[string]any) string {
	hdr := map[string]any{"alg": "RS256", "kid": "rsa-1", "jwk": jwkOf(t, kOther)}
	return forge(hdr, c, func(in []byte) []byte {
		sum := sha256.Sum256(in)
		sig, _ := kOther.priv.Sign(rand.Reader, sum[:], cryptoSHA256)
		return sig
	})
}

func TestJWTValid(t *testing.T) {
	clk := newClock()
	set := fileSet(t, clk)
	now := clk.Now()
	c := claims(now)
	arr := claims(now)
	arr["scope"] = []string{"read", "write", "with space", ""}
	arr["aud"] = []string{"x", testAudience}
	noKid := forge(map[string]any{"alg": "EdDSA"}, c, func(in []byte) []byte {
		sig, _ := kEd.priv.Sign(nil, in, cryptoNone)
		return sig
	})
	tests := []struct {
		name, policy, tok string
	}{
		{"RS256", "rs", sign(t, kRSA, c)},
		{"RS256 (multi)", "rs-multi", sign(t, kRSA, c)},
		{"ES256", "es", sign(t, kEC, c)},
		{"EdDSA", "ed", sign(t, kEd, c)},
		{"EdDSA without kid", "ed", noKid},
		{"HS256 from a file", "hs", sign(t, kHS, c)},
		{"scopes and aud as arrays", "rs", sign(t, kRSA, arr)},
		{"typ at+jwt", "rs", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"at+jwt"}`, c)},
		{"typ application/at+jwt", "rs", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"application/at+jwt"}`, c)},
		{"typ Application/JWT", "rs", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"Application/JWT"}`, c)},
		{"typ jwt", "rs", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"jwt"}`, c)},
		{"no typ", "rs", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1"}`, c)},
		{"typ AT+JWT, required", "rs-at", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"AT+JWT"}`, c)},
		{"typ application/at+jwt, required", "rs-at", rsaWithHeader(t, `{"alg":"RS256","kid":"rsa-1","typ":"application/at+jwt"}`, c)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, scheme := range []string{"Bearer ", "bearer ", "BEARER  "} {
				id, err := set.Policy(tc.policy).Authenticate(http.Header{"Authorization": {scheme + tc.tok}})
				if err != nil {
					t.Fatalf("%q: %v", scheme, err)
				}
				if id.Subject != "user-1" || id.JTI != "j-1" || id.Tenant != "acme" || id.Issuer != testIssuer ||
					id.PolicyID != tc.policy || id.KeyID != "" || id.ExpiresAt.Unix() != now.Add(time.Hour).Unix() {
					t.Fatalf("identity %+v", id)
				}
				if !slices.Equal(id.Scopes, []string{"read", "write"}) || !id.HasScopes([]string{"write", "read"}) ||
					id.HasScopes([]string{"admin"}) || !id.HasScopes(nil) {
					t.Fatalf("scopes %q", id.Scopes)
				}
				if v, ok := id.Claim("seller"); !ok || v != "12345" {
					t.Fatalf("claim seller = %q %v", v, ok)
				}
				if v, ok := id.Claim("sub"); !ok || v != "user-1" {
					t.Fatalf("claim sub = %q %v", v, ok)
				}
				if _, ok := id.Claim("nope"); ok {
					t.Fatal("claim nope found")
				}
			}
		})
	}
}

func TestLeeway(t *testing.T) {
	clk := newClock()
	genKeys(t)
	set := newSet(t, []snapshot.AuthPolicy{jwtConf("rs", []string{"RS256"}, func(j *snapshot.JWTPolicy) {
		j.JWKSFile = writeJWKS(t, kRSA)
		j.LeewayMs = 10_000
	})}, nil, quietOptions(clk.Now))
	now := clk.Now()
	tests := []struct {
		name   string
		key    string
		at     time.Duration
		reason string // "" accepted
	}{
		{"exp 9s ago", "exp", -9 * time.Second, ""},
		{"exp 11s ago", "exp", -11 * time.Second, "token expired"},
		{"nbf in 9s", "nbf", 9 * time.Second, ""},
		{"nbf in 11s", "nbf", 11 * time.Second, "token not yet valid"},
		{"iat in 9s", "iat", 9 * time.Second, ""},
		{"iat in 11s", "iat", 11 * time.Second, "token issued in the future"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := claims(now)
			c[tc.key] = now.Add(tc.at).Unix()
			tok := sign(t, kRSA, c)
			_, err := set.Policy("rs").Authenticate(bearer(tok))
			if tc.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			failure(t, err, tc.reason, tok)
		})
	}
}

func TestClaimValues(t *testing.T) {
	tests := []struct {
		raw, want string
		ok        bool
	}{
		{`"s"`, "s", true}, {`"\u0041b"`, "Ab", true}, {`12345`, "12345", true}, {`-7`, "-7", true},
		{`1.5`, "1.5", true}, {`1e3`, "1000", true}, {`true`, "true", true}, {`null`, "", false},
		{`[1]`, "", false}, {`{"a":1}`, "", false}, {`"a\nb"`, "", false},
	}
	for _, tc := range tests {
		id := Identity{payload: seg([]byte(`{"x":` + tc.raw + `,"y":[1,{"x":2}]}`))}
		if got, ok := id.Claim("x"); got != tc.want || ok != tc.ok {
			t.Errorf("Claim(%s) = %q %v, want %q %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

// The verified-token cache never extends a token's life nor outlives the
// key set it was verified with.
func TestTokenCacheBounds(t *testing.T) {
	genKeys(t)
	t.Run("expiry", func(t *testing.T) {
		clk := newClock()
		set := newSet(t, []snapshot.AuthPolicy{jwtConf("p", []string{"EdDSA"}, func(j *snapshot.JWTPolicy) {
			j.JWKSFile = writeJWKS(t, kEd)
			j.LeewayMs = 1000
		})}, nil, quietOptions(clk.Now))
		p := set.Policy("p")
		c := claims(clk.Now())
		c["exp"] = clk.Now().Add(10 * time.Second).Unix()
		tok := sign(t, kEd, c)
		for i := 0; i < 2; i++ { // the second is served from the cache
			if _, err := p.Authenticate(bearer(tok)); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(12 * time.Second) // past exp + leeway, within the cache TTL
		if _, err := p.Authenticate(bearer(tok)); err == nil {
			t.Fatal("an expired token was served from the cache")
		}
	})
	t.Run("stale keys", func(t *testing.T) {
		clk := newClock()
		srv := newJWKSServer(t, kRSA)
		set := newSet(t, []snapshot.AuthPolicy{urlPolicy("p", srv.URL, func(j *snapshot.JWTPolicy) {
			j.JWKSRefreshMs = 3_600_000
			j.JWKSMaxStaleMs = 3_600_000
			j.UnknownKidRefetchMs = 3_600_000
		})}, nil, quietOptions(clk.Now))
		p := set.Policy("p")
		tok := sign(t, kRSA, claims(clk.Now()))
		if _, err := p.Authenticate(bearer(tok)); err != nil {
			t.Fatal(err)
		}
		srv.down.Store(true)
		clk.Advance(3_600_000*time.Millisecond + time.Second) // keys past max stale
		if _, err := p.Authenticate(bearer(tok)); err == nil {
			t.Fatal("a cached token was accepted while the key set is past its max stale age")
		}
	})
	t.Run("different bytes miss", func(t *testing.T) {
		set := newSet(t, []snapshot.AuthPolicy{jwtConf("p", []string{"EdDSA"}, func(j *snapshot.JWTPolicy) {
			j.JWKSFile = writeJWKS(t, kEd)
		})}, nil, quietOptions(nil))
		p := set.Policy("p")
		tok := sign(t, kEd, claims(time.Now()))
		if _, err := p.Authenticate(bearer(tok)); err != nil {
			t.Fatal(err)
		}
		tampered := tok[:len(tok)-2] + "AA"
		if tampered == tok {
			tampered = tok[:len(tok)-2] + "BB"
		}
		if _, err := p.Authenticate(bearer(tampered)); err == nil {
			t.Fatal("a tampered copy of a cached token was accepted")
		}
	})
}
