package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// realToken is a JWS signed by k whose claims are valid at now and whose
// jti is jti: a distinct, real token per jti, made without jwx so that
// tens of thousands of them are affordable.
func realToken(t testing.TB, k testKey, now time.Time, jti int) string {
	tok, err := signToken(k, now, jti)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func signToken(k testKey, now time.Time, jti int) (string, error) {
	c := claims(now)
	c["jti"] = fmt.Sprintf("j-%d", jti)
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return signPayload(k, payload)
}

// signPayload signs payload (claims JSON) with k under a typ JWT header.
func signPayload(k testKey, payload []byte) (string, error) {
	input := seg(map[string]string{"alg": k.alg.String(), "kid": k.kid, "typ": "JWT"}) + "." + seg(payload)
	sum := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	switch priv := k.priv.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(priv, []byte(input))
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, priv, sum[:])
		if err != nil {
			return "", err
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	case *rsa.PrivateKey:
		if sig, err = rsa.SignPKCS1v15(nil, priv, crypto.SHA256, sum[:]); err != nil {
			return "", err
		}
	case nil:
		m := hmac.New(sha256.New, k.hmac)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	default:
		return "", fmt.Errorf("no signer for %T", k.priv)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Real tokens of every public-key algorithm spread over all the shards:
// 512 tokens per algorithm, verified and cached through Authenticate, put
// between a quarter and 2.5 times the mean (32) in every shard. (A fair
// hash misses these bounds with probability ~3e-6 per run; the old shard
// choice, the last base64 character, used 2 shards.)
func TestTokenCacheSpreadsRealTokens(t *testing.T) {
	genKeys(t)
	const n = 512
	mean := n / tokenCacheShards
	for _, k := range []testKey{kEd, kEC, kRSA} {
		t.Run(k.alg.String(), func(t *testing.T) {
			set := newSet(t, []snapshot.AuthPolicy{jwtConf("p", []string{k.alg.String()}, func(j *snapshot.JWTPolicy) {
				j.JWKSFile = writeJWKS(t, k)
			})}, nil, quietOptions(nil))
			p := set.Policy("p")
			now := time.Now()
			for i := 0; i < n; i++ {
				if _, err := p.Authenticate(bearer(realToken(t, k, now, i))); err != nil {
					t.Fatalf("token %d: %v", i, err)
				}
			}
			per, total := p.jwt.cache.sizes()
			if total != n {
				t.Fatalf("cache holds %d tokens, want %d", total, n)
			}
			for i, got := range per {
				if got < mean/4 || got > mean*5/2 {
					t.Fatalf("shard %d holds %d tokens, want %d..%d (mean %d); all shards: %v", i, got, mean/4, mean*5/2, mean, per)
				}
			}
		})
	}
}

// The cache holds its documented capacity, 65,536 tokens, when fed real
// signed tokens: every shard fills. The first 1,024 are EdDSA, the next
// 1,024 ES256, the next 256 RS256, the rest HS256 (signing ~67,000
// public-key tokens took 24 s of CPU under -race; the spread of each
// public-key kind is checked above). After exactly as many tokens as the
// capacity, each shard holds at least 90% of its 4,096 (a fair hash puts
// 4,096 ± 62 in each; 90% is 6.6 standard deviations below).
func TestTokenCacheFillsToCapacity(t *testing.T) {
	genKeys(t)
	if tokenCacheCap != 65_536 {
		t.Fatalf("capacity %d, documented as 65,536", tokenCacheCap)
	}
	const limit = tokenCacheCap * 5 / 4 // full long before: ~68,000 tokens
	now := time.Now()
	tmpl, err := json.Marshal(claims(now))
	if err != nil {
		t.Fatal(err)
	}
	jtiAt := strings.Index(string(tmpl), `"jti":"`) + len(`"jti":"`)
	kinds := []struct {
		k    testKey
		upTo int
	}{{kEd, 1024}, {kEC, 2048}, {kRSA, 2304}, {kHS, limit}}
	tokens := make(chan string, 1024)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := w; ; i += workers {
				k := kinds[0].k
				for _, kd := range kinds {
					if i < kd.upTo {
						k = kd.k
						break
					}
				}
				payload := append(append(append([]byte{}, tmpl[:jtiAt]...), strconv.Itoa(i)...), tmpl[jtiAt:]...)
				tok, err := signPayload(k, payload)
				if err != nil {
					t.Error(err)
					tok = ""
				}
				select {
				case tokens <- tok:
				case <-stop:
					return
				}
			}
		})
	}
	defer wg.Wait()
	defer close(stop)

	var c tokenCache
	ks := &keySet{}
	until := now.Add(time.Hour)
	for put := 1; put <= limit; put++ {
		tok := <-tokens
		if tok == "" {
			t.FailNow() // a signer failed (reported above)
		}
		c.put(tok, Identity{}, ks, until)
		if put < tokenCacheCap {
			continue
		}
		per, total := c.sizes()
		if put == tokenCacheCap {
			for i, got := range per {
				if got < tokenCacheMax*9/10 {
					t.Fatalf("after %d tokens shard %d holds %d, want ≥ %d; all shards: %v", put, i, got, tokenCacheMax*9/10, per)
				}
			}
		}
		if total == tokenCacheCap {
			t.Logf("full after %d tokens", put)
			return
		}
		if total > tokenCacheCap {
			t.Fatalf("cache holds %d tokens, over its capacity %d", total, tokenCacheCap)
		}
	}
	per, total := c.sizes()
	t.Fatalf("after %d tokens the cache holds %d, want its capacity %d; shards: %v", limit, total, tokenCacheCap, per)
}
