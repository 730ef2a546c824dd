package auth

import (
	"net/http"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// benchVerify authenticates one valid token, signed by k, against a
// policy with a local (file) key set: the full verification every time
// (the verified-token cache is emptied), or, cached, what a client that
// repeats its token costs.
func benchVerify(b *testing.B, k testKey) { benchVerifyWith(b, k, false) }

func benchVerifyWith(b *testing.B, k testKey, cached bool) {
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
		if !cached {
			p.jwt.cache = tokenCache{}
		}
		if _, err := p.Authenticate(h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyCachedEdDSA(b *testing.B) { genKeys(b); benchVerifyWith(b, kEd, true) }
func BenchmarkVerifyCachedRS256(b *testing.B) { genKeys(b); benchVerifyWith(b, kRSA, true) }

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
