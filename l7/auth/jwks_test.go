package auth

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func urlPolicy(id, url string, mod func(*snapshot.JWTPolicy)) snapshot.AuthPolicy {
	return jwtConf(id, []string{"RS256", "ES256", "EdDSA"}, func(j *snapshot.JWTPolicy) {
		j.JWKSURL = url
		if mod != nil {
			mod(j)
		}
	})
}

// eventually polls cond every 50 ms for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestJWKSURLAlgorithms(t *testing.T) {
	genKeys(t)
	srv := newJWKSServer(t, kRSA, kEC, kEd)
	set := newSet(t, []snapshot.AuthPolicy{urlPolicy("p", srv.URL, nil)}, nil, quietOptions(nil))
	for _, k := range []testKey{kRSA, kEC, kEd} {
		if _, err := set.Policy("p").Authenticate(bearer(sign(t, k, claims(time.Now())))); err != nil {
			t.Errorf("%s: %v", k.alg, err)
		}
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("fetches = %d, want 1", n)
	}
}

func TestJWKSRotation(t *testing.T) {
	genKeys(t)
	srv := newJWKSServer(t, kRSA, kRSA2)
	set := newSet(t, []snapshot.AuthPolicy{urlPolicy("p", srv.URL, func(j *snapshot.JWTPolicy) {
		j.JWKSRefreshMs = 1000
		j.UnknownKidRefetchMs = 3_600_000 // only the background refresh may fetch
	})}, nil, quietOptions(nil))
	p := set.Policy("p")
	oldTok, newTok := sign(t, kRSA, claims(time.Now())), sign(t, kRSA2, claims(time.Now()))
	for _, tok := range []string{oldTok, newTok} {
		if _, err := p.Authenticate(bearer(tok)); err != nil {
			t.Fatalf("overlap: %v", err)
		}
	}
	srv.serve(t, kRSA2) // the old key is retired
	before := srv.fetches.Load()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 { // requests keep coming while the refresh publishes (for -race)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := p.Authenticate(bearer(newTok)); err != nil {
					t.Errorf("new key during rotation: %v", err)
					return
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	eventually(t, "the refresh to drop the old key", func() bool {
		_, err := p.Authenticate(bearer(oldTok))
		return err != nil
	})
	_, err := p.Authenticate(bearer(oldTok))
	failure(t, err, "unknown signing key", oldTok)
	if _, err := p.Authenticate(bearer(newTok)); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
	t.Logf("background fetches until the old key was gone: %d", srv.fetches.Load()-before)
}

func TestJWKSStale(t *testing.T) {
	genKeys(t)
	clk := newClock()
	srv := newJWKSServer(t, kRSA)
	set := newSet(t, []snapshot.AuthPolicy{urlPolicy("p", srv.URL, func(j *snapshot.JWTPolicy) {
		j.JWKSRefreshMs = 3_600_000
		j.JWKSMaxStaleMs = 600_000
		j.UnknownKidRefetchMs = 60_000
	})}, nil, quietOptions(clk.Now))
	p := set.Policy("p")
	tok := sign(t, kRSA, claims(clk.Now())) // valid for an hour
	unknown := sign(t, testKey{kid: "new", alg: jwa.RS256, priv: kRSA.priv}, claims(clk.Now()))
	auth := func(tok string) error { _, err := p.Authenticate(bearer(tok)); return err }

	srv.down.Store(true) // the issuer is unreachable from now on
	clk.Advance(5 * time.Minute)
	if err := auth(tok); err != nil {
		t.Fatalf("within max stale: %v", err)
	}
	failure(t, auth(unknown), "unknown signing key", unknown) // one refetch, which fails
	if err := auth(tok); err != nil {
		t.Fatalf("a failed refetch dropped the last good set: %v", err)
	}
	clk.Advance(5*time.Minute + time.Second) // 10 min 1 s after the last good fetch
	failure(t, auth(tok), "signing keys unavailable", tok)

	srv.down.Store(false) // the issuer is back; the next refetch (rate-limited) recovers
	clk.Advance(time.Minute)
	if err := auth(tok); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if n := srv.fetches.Load(); n != 4 {
		t.Errorf("fetches = %d, want 4 (initial, unknown kid, stale set, recovery)", n)
	}
}

func TestJWKSFile(t *testing.T) {
	genKeys(t)
	dir := t.TempDir()
	weak := filepath.Join(dir, "weak.json")
	os.WriteFile(weak, []byte(`{"keys":[{"kty":"RSA","kid":"w","n":"AQAB","e":"AQAB"},{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`), 0o600)
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte(`not json`), 0o600)
	enc := filepath.Join(dir, "enc.json")
	os.WriteFile(enc, []byte(strings.Replace(string(jwksJSON(t, kRSA)), `"kty"`, `"use":"enc","kty"`, 1)), 0o600)
	tests := []struct {
		name, file, err string
	}{
		{"good", writeJWKS(t, kRSA, kEd), ""},
		{"missing", filepath.Join(dir, "nope.json"), "no such file"},
		{"garbage", garbage, "parse JWKS"},
		{"no usable key", weak, "no usable"},
		{"encryption keys only", enc, "no usable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := NewSet([]snapshot.AuthPolicy{jwtConf("f", []string{"RS256", "EdDSA"}, func(j *snapshot.JWTPolicy) {
				j.JWKSFile = tc.file
			})}, nil, quietOptions(nil))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer set.Close()
			for _, k := range []testKey{kRSA, kEd} {
				if _, err := set.Policy("f").Authenticate(bearer(sign(t, k, claims(time.Now())))); err != nil {
					t.Fatalf("%s: %v", k.alg, err)
				}
			}
		})
	}
}

func TestCarryOver(t *testing.T) {
	genKeys(t)
	srv := newJWKSServer(t, kRSA)
	conf := func(refreshMs int) []snapshot.AuthPolicy {
		mod := func(j *snapshot.JWTPolicy) { j.JWKSRefreshMs = refreshMs }
		// two policies on one URL share one key set
		return []snapshot.AuthPolicy{urlPolicy("a", srv.URL, mod), urlPolicy("b", srv.URL, mod)}
	}
	tok := sign(t, kRSA, claims(time.Now()))
	s1, err := NewSet(conf(3_600_000), nil, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("fetches after the first set = %d, want 1", n)
	}
	srv.down.Store(true) // a refetch now would lose the keys
	s2, err := NewSet(conf(3_600_000), s1, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s1.Close() // idempotent
	for _, id := range []string{"a", "b"} {
		if _, err := s2.Policy(id).Authenticate(bearer(tok)); err != nil {
			t.Fatalf("policy %s after the swap: %v", id, err)
		}
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("fetches after the swap = %d, want 1 (carried over)", n)
	}
	if !s2.sources[srcKey{srv.URL, time.Hour}].acquire() {
		t.Fatal("closing the old set stopped the carried source")
	}
	s2.sources[srcKey{srv.URL, time.Hour}].release()

	srv.down.Store(false)
	s3, err := NewSet(conf(1000), s2, quietOptions(nil)) // refresh changed: a new source
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("fetches after a refresh change = %d, want 2", n)
	}
	eventually(t, "a background refresh", func() bool { return srv.fetches.Load() > 2 })
	s3.Close()
	// A fetch already under way when Close cancels it may still reach the
	// server, however late a loaded box lets it run: allow that one, and
	// no other over more than two refresh periods (a negative check needs
	// a window; it is not a speed bound).
	stopped := srv.fetches.Load()
	time.Sleep(2600 * time.Millisecond)
	if n := srv.fetches.Load(); n > stopped+1 {
		t.Fatalf("fetches went on after Close: %d -> %d", stopped, n)
	}
}

// TestUnknownKidFlood sends 1000 tokens with random kids, concurrently,
// and counts the issuer's JWKS requests.
func TestUnknownKidFlood(t *testing.T) {
	genKeys(t)
	clk := newClock()
	srv := newJWKSServer(t, kRSA)
	set := newSet(t, []snapshot.AuthPolicy{urlPolicy("p", srv.URL, nil)}, nil, quietOptions(clk.Now)) // refetch gap 30 s
	p := set.Policy("p")
	flood := func() {
		t.Helper()
		var wg sync.WaitGroup
		toks := make(chan string, 1000)
		for range 1000 {
			toks <- sign(t, testKey{kid: fmt.Sprintf("k%x", rand.Uint64()), alg: jwa.EdDSA, priv: kEd.priv}, claims(clk.Now()))
		}
		close(toks)
		for range 32 {
			wg.Go(func() {
				for tok := range toks {
					if _, err := p.Authenticate(bearer(tok)); err == nil || err.(*Failure).Reason != "unknown signing key" {
						t.Errorf("random kid: %v", err)
					}
				}
			})
		}
		wg.Wait()
	}
	flood()
	first := srv.fetches.Load()
	clk.Advance(31 * time.Second)
	flood()
	second := srv.fetches.Load()
	clk.Advance(10 * time.Second)
	flood()
	third := srv.fetches.Load()
	t.Logf("JWKS fetches: initial+flood 1 = %d, after 31 s + flood 2 = %d, after 10 s more + flood 3 = %d", first, second, third)
	if first != 1 || second != 2 || third != 2 {
		t.Fatalf("fetches = %d, %d, %d; want 1, 2, 2 (one per 30 s at most)", first, second, third)
	}

	// A real new key is found by the refetch once the gap has passed.
	srv.serve(t, kRSA, kRSA2)
	newTok := sign(t, kRSA2, claims(clk.Now()))
	failure(t, func() error { _, err := p.Authenticate(bearer(newTok)); return err }(), "unknown signing key", newTok)
	clk.Advance(31 * time.Second)
	if _, err := p.Authenticate(bearer(newTok)); err != nil {
		t.Fatalf("new kid after the gap: %v", err)
	}
	if n := srv.fetches.Load(); n != 3 {
		t.Fatalf("fetches = %d, want 3", n)
	}
}
