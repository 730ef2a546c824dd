package auth

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// FuzzAuthenticate feeds arbitrary Authorization and X-Api-Key values to
// JWT and API-key policies. Nothing may panic, and whatever authenticates
// must carry a signature that jwx verifies with the policy's key, or be
// one of the configured API keys.
func FuzzAuthenticate(f *testing.F) {
	genKeys(f)
	file := writeJWKS(f, kRSA, kEC, kEd)
	hs := writeJWKS(f, kHS)
	onFile := func(p string) func(*snapshot.JWTPolicy) { return func(j *snapshot.JWTPolicy) { j.JWKSFile = p } }
	set := newSet(f, append([]snapshot.AuthPolicy{
		jwtConf("RS256", []string{"RS256"}, onFile(file)),
		jwtConf("ES256", []string{"ES256"}, onFile(file)),
		jwtConf("EdDSA", []string{"EdDSA"}, onFile(file)),
		jwtConf("HS256", []string{"HS256"}, onFile(hs)),
	}, apiKeyPolicies()...), nil, quietOptions(nil))
	pub := map[string]testKey{"RS256": kRSA, "ES256": kEC, "EdDSA": kEd, "HS256": kHS}

	c := claims(time.Now().Add(time.Hour)) // still valid while the fuzzer runs
	c["nbf"], c["iat"] = time.Now().Unix(), time.Now().Unix()
	for _, k := range []testKey{kRSA, kEC, kEd, kHS} {
		f.Add("Bearer "+sign(f, k, c), keyA)
	}
	f.Add("Bearer "+forge(map[string]any{"alg": "none"}, c, nil), keyB+" ")
	for _, typ := range []string{"application/at+jwt", "secevent+jwt", ""} { // typ is checked
		f.Add("Bearer "+forge(map[string]any{"alg": "EdDSA", "kid": kEd.kid, "typ": typ}, c, func(in []byte) []byte {
			sig, _ := kEd.priv.Sign(nil, in, cryptoNone)
			return sig
		}), "")
	}
	f.Add("bearer  a.b.c", "")
	f.Add("Bearer eyJhbGciOiJSUzI1NiJ9..", "\x00")
	f.Add("Basic Zm9vOmJhcg==", strings.Repeat("k", 300))

	f.Fuzz(func(t *testing.T, authz, apiKey string) {
		h := http.Header{"Authorization": {authz}, "X-Api-Key": {apiKey}}
		for alg, k := range pub {
			id, err := set.Policy(alg).Authenticate(h)
			if err != nil {
				if fl, ok := err.(*Failure); !ok || fl.Status != 401 || fl.Challenge == "" {
					t.Fatalf("%s: error %v", alg, err)
				}
				continue
			}
			tok := strings.TrimLeft(authz[len("Bearer "):], " ")
			var key any = k.hmac
			if k.priv != nil {
				key = k.priv.Public()
			}
			if _, err := jws.Verify([]byte(tok), jws.WithKey(k.alg, key)); err != nil {
				t.Fatalf("%s authenticated %+v without a valid signature: %v", alg, id, err)
			}
			if id.Issuer != testIssuer {
				t.Fatalf("%s: issuer %q", alg, id.Issuer)
			}
			id.Claim("seller")
		}
		id, err := set.Policy("k1").Authenticate(h)
		if err == nil && apiKey != keyA && apiKey != keyB {
			t.Fatalf("API key %q authenticated as %+v", apiKey, id)
		}
	})
}

// FuzzMembers checks the allocation-free JSON walker against
// encoding/json on every valid JSON object.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,{"c":"}"}],"d":"\"x\\"}`, ` { "a" : { "b" : [ ] } , "\u0061" : null } `,
		`{"exp":1e3,"aud":["x","y"],"scope":"a b"}`, `[1,2]`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var want map[string]json.RawMessage
		trimmed := bytes.TrimSpace(data)
		isObject := len(trimmed) > 0 && trimmed[0] == '{'
		if isObject && json.Unmarshal(data, &want) != nil {
			t.Fatal("encoding/json rejects a valid object")
		}
		m, ok := newMembers(data)
		if ok != isObject {
			t.Fatalf("newMembers ok = %v, encoding/json object = %v", ok, isObject)
		}
		if !ok {
			return
		}
		got := map[string][]byte{}
		n := 0
		for k, v, more := m.next(); more; k, v, more = m.next() {
			n++
			var key string
			if err := json.Unmarshal(k, &key); err != nil {
				t.Fatalf("key %q: %v", k, err)
			}
			if !keyIs(k, key) {
				t.Fatalf("keyIs(%q, %q) = false", k, key)
			}
			got[key] = v // last wins, as in encoding/json
			plainValue(v)
			numericDate(v)
			if e, ok := newElements(v); ok {
				for x, more := e.nextElem(); more; x, more = e.nextElem() {
					if !json.Valid(x) {
						t.Fatalf("element %q of %q", x, v)
					}
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d keys (%d members), encoding/json %d", len(got), n, len(want))
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
				t.Fatalf("key %q = %q, encoding/json %q", k, got[k], v)
			}
		}
	})
}
