package demo

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// ensureJWTKey keeps an existing Ed25519 signing key or makes one, and
// (re)writes its public JWKS (kid JWTKeyID, alg EdDSA).
func ensureJWTKey(keyPath, jwksPath string) error {
	if _, err := os.Stat(keyPath); err != nil {
		priv, _, err := snapshot.GenerateKey()
		if err != nil {
			return fmt.Errorf("demo: jwt key: %w", err)
		}
		if err := writeFile(keyPath, priv, 0o600); err != nil {
			return err
		}
	}
	priv, err := snapshot.ReadPrivateKey(keyPath)
	if err != nil {
		return fmt.Errorf("demo: jwt key: %w", err)
	}
	pub, err := jwk.FromRaw(priv.Public().(ed25519.PublicKey))
	if err != nil {
		return fmt.Errorf("demo: jwt key: %w", err)
	}
	for k, v := range map[string]any{jwk.KeyIDKey: JWTKeyID, jwk.AlgorithmKey: jwa.EdDSA, jwk.KeyUsageKey: "sig"} {
		if err := pub.Set(k, v); err != nil {
			return fmt.Errorf("demo: jwks %s: %w", k, err)
		}
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return fmt.Errorf("demo: jwks: %w", err)
	}
	data, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("demo: jwks: %w", err)
	}
	return writeFile(jwksPath, append(data, '\n'), 0o644)
}

// Token mints a JWT for the demo's JWT routes with the key Write left in
// dir: issuer Issuer, audience Audience, the tenant claim, the scopes
// (space-separated in "scope"), valid for ttl from now. With no scopes
// it carries both ScopeRead and ScopeWrite.
func Token(dir, tenant string, ttl time.Duration, scopes ...string) (string, error) {
	if tenant == "" || ttl <= 0 {
		return "", fmt.Errorf("demo token: needs a tenant and a positive ttl (got %q, %s)", tenant, ttl)
	}
	if len(scopes) == 0 {
		scopes = []string{ScopeRead, ScopeWrite}
	}
	priv, err := snapshot.ReadPrivateKey(filepath.Join(dir, "jwt.key"))
	if err != nil {
		return "", fmt.Errorf("demo token: %w", err)
	}
	key, err := jwk.FromRaw(priv)
	if err != nil {
		return "", fmt.Errorf("demo token: %w", err)
	}
	if err := key.Set(jwk.KeyIDKey, JWTKeyID); err != nil {
		return "", fmt.Errorf("demo token: %w", err)
	}
	now := time.Now()
	tok, err := jwt.NewBuilder().Issuer(Issuer).Audience([]string{Audience}).Subject("lab-user-"+tenant).
		IssuedAt(now).NotBefore(now.Add(-time.Minute)).Expiration(now.Add(ttl)).
		Claim("tenant", tenant).Claim("scope", strings.Join(scopes, " ")).Build()
	if err != nil {
		return "", fmt.Errorf("demo token: %w", err)
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.EdDSA, key))
	if err != nil {
		return "", fmt.Errorf("demo token for %s: %w", tenant, err)
	}
	return string(signed), nil
}

// Lags is the body of POST /v1/platforms/app-db/lag (monitor token): every
// region's replica at lag 0, observed at now. Platform reads need a lag
// signal no older than MaxSignalAge; the control plane keeps lags in
// memory only, so push them after every control plane start.
func Lags(regions []string, now time.Time) []byte {
	type lag struct {
		Region     string `json:"region"`
		LagMs      int    `json:"lag_ms"`
		ObservedAt string `json:"observed_at"`
	}
	var body struct {
		Lags []lag `json:"lags"`
	}
	for _, r := range regions {
		body.Lags = append(body.Lags, lag{Region: r, ObservedAt: now.UTC().Format(time.RFC3339Nano)})
	}
	out, _ := json.Marshal(body)
	return out
}

// Writer is the body of POST /v1/platforms/app-db/writer (admin token)
// that makes region the platform's writer; expectedEpoch 0 means no writer
// yet.
func Writer(region string, expectedEpoch uint64) []byte {
	out, _ := json.Marshal(map[string]any{"region": region, "expected_epoch": expectedEpoch})
	return out
}
