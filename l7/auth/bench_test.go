package auth

import (
	"net/http"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// benchVerify authenticates one valid token, signed by k, against a
// policy with a local (file) key set.
func benchVerify(b *testing.B, k testKey) {
	genKeys(b)
	set := newSet(b, []snapshot.AuthPolicy{jwtConf("p", []string{k.alg.String()}, func(j *snapshot.JWTPolicy) {
		j.JWKSFile = writeJWKS(b, kRSA, kEC, kEd)
	})}, nil, quietOptions(nil))
	p := set.Policy("p")
	h := bearer(sign(b, k, claims(time.Now())))
	if _, err := p.Authenticate(h); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Authenticate(h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyRS256(b *testing.B) { genKeys(b); benchVerify(b, kRSA) }
func BenchmarkVerifyES256(b *testing.B) { genKeys(b); benchVerify(b, kEC) }
func BenchmarkVerifyEdDSA(b *testing.B) { genKeys(b); benchVerify(b, kEd) }

func BenchmarkAPIKey(b *testing.B) {
	set := newSet(b, apiKeyPolicies(), nil, quietOptions(nil))
	p := set.Policy("k1")
	h := http.Header{"X-Api-Key": {keyB}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Authenticate(h); err != nil {
			b.Fatal(err)
		}
	}
}
