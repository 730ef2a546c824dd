package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// TestEveryAlgorithm signs with jwx for every algorithm a policy may pin
// and verifies; the same token must fail under every other algorithm.
func TestEveryAlgorithm(t *testing.T) {
	genKeys(t)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	ec521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	secret := func(n int) []byte { b := make([]byte, n); rand.Read(b); return b }
	key := func(name string) testKey {
		a := jwa.SignatureAlgorithm(name)
		var priv crypto.Signer
		switch name[:2] {
		case "RS", "PS":
			priv = kRSA.priv
		case "ES":
			priv = map[string]crypto.Signer{"ES256": kEC.priv, "ES384": ec384, "ES512": ec521}[name]
		case "Ed":
			priv = kEd.priv
		case "HS":
			return testKey{kid: name, alg: a, hmac: secret(map[string]int{"HS256": 32, "HS384": 48, "HS512": 64}[name])}
		}
		return testKey{kid: name, alg: a, priv: priv}
	}
	var ks []testKey
	var ps []snapshot.AuthPolicy
	for _, name := range snapshot.JWTAlgorithms {
		ks = append(ks, key(name))
	}
	file := writeJWKS(t, ks...)
	for _, name := range snapshot.JWTAlgorithms {
		ps = append(ps, jwtConf(name, []string{name}, func(j *snapshot.JWTPolicy) { j.JWKSFile = file }))
	}
	set := newSet(t, ps, nil, quietOptions(nil))
	for _, k := range ks {
		tok := sign(t, k, claims(time.Now()))
		for _, name := range snapshot.JWTAlgorithms {
			_, err := set.Policy(name).Authenticate(bearer(tok))
			switch {
			case name == k.alg.String() && err != nil:
				t.Errorf("%s: %v", name, err)
			case name != k.alg.String():
				failure(t, err, "algorithm not allowed", tok)
			}
		}
	}
	// A short HMAC secret is never used.
	short := testKey{kid: "short", alg: jwa.HS256, hmac: secret(16)}
	_, err := NewSet([]snapshot.AuthPolicy{jwtConf("s", []string{"HS256"}, func(j *snapshot.JWTPolicy) {
		j.JWKSFile = writeJWKS(t, short)
	})}, nil, quietOptions(nil))
	if err == nil {
		t.Fatal("a 16-byte HS256 secret was accepted")
	}
}
