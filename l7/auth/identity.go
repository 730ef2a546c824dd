package auth

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"time"
)

// Identity is what a request proved about itself.
type Identity struct {
	PolicyID string // the auth policy that verified it
	Tenant   string // JWT: the policy's tenant_claim; API key: the key's tenant
	Subject  string // JWT: sub; empty for API keys
	KeyID    string // API key: the key's id; empty for JWTs
	JTI      string // JWT: jti
	Issuer   string // JWT: iss (equal to the policy's issuer)
	// ExpiresAt is the JWT's exp; zero for API keys.
	ExpiresAt time.Time
	// Scopes granted. For API keys the slice is shared with the policy:
	// read it, never modify it.
	Scopes []string

	// payload is the token's base64url payload segment (a sub-string of the
	// request header, not a copy), decoded only when Claim is called.
	payload string
}

// Claim returns the value of the JWT claim name as plain text: strings
// as they are, numbers without exponent where they are integers, booleans
// as true/false. ok is false for API-key identities, missing claims,
// null, objects, arrays and strings with control characters.
func (id *Identity) Claim(name string) (string, bool) {
	if id.payload == "" {
		return "", false
	}
	buf := make([]byte, base64.RawURLEncoding.DecodedLen(len(id.payload)))
	n, err := b64.Decode(buf, []byte(id.payload))
	if err != nil || !json.Valid(buf[:n]) {
		return "", false
	}
	m, ok := newMembers(buf[:n])
	if !ok {
		return "", false
	}
	found, value := false, []byte(nil)
	for k, v, ok := m.next(); ok; k, v, ok = m.next() {
		if keyIs(k, name) {
			if found {
				return "", false // duplicate claim names are ambiguous
			}
			found, value = true, v
		}
	}
	if !found {
		return "", false
	}
	return plainValue(value)
}

// HasScopes reports whether every required scope was granted.
func (id *Identity) HasScopes(required []string) bool {
	for _, r := range required {
		if !slices.Contains(id.Scopes, r) {
			return false
		}
	}
	return true
}

// Failure is the error Authenticate returns. The values are shared and
// must not be modified. Reason is one of a fixed set of short phrases
// (fit for a metric label); it never contains key material or token
// contents.
type Failure struct {
	Status    int    // always 401
	Reason    string // e.g. "token expired"
	Challenge string // the WWW-Authenticate value to answer with
}

func (f *Failure) Error() string { return "auth: " + f.Reason }

const realm = `realm="rampart"`

func bearerFailure(errCode, reason string) *Failure {
	return &Failure{Status: 401, Reason: reason,
		Challenge: `Bearer ` + realm + `, error="` + errCode + `", error_description="` + reason + `"`}
}

// The failures. Missing credentials carry no error attribute (RFC 6750
// §3.1); everything else names invalid_request or invalid_token.
var (
	errMissingBearer   = &Failure{Status: 401, Reason: "missing bearer token", Challenge: `Bearer ` + realm}
	errMultipleHeaders = bearerFailure("invalid_request", "more than one credential header")
	errMalformed       = bearerFailure("invalid_token", "malformed token")
	errTooLarge        = bearerFailure("invalid_token", "token too large")
	errAlgorithm       = bearerFailure("invalid_token", "algorithm not allowed")
	errUnsupported     = bearerFailure("invalid_token", "unsupported token header")
	errType            = bearerFailure("invalid_token", "token type not allowed")
	errUnknownKey      = bearerFailure("invalid_token", "unknown signing key")
	errKeysUnavailable = bearerFailure("invalid_token", "signing keys unavailable")
	errSignature       = bearerFailure("invalid_token", "invalid signature")
	errClaims          = bearerFailure("invalid_token", "malformed claims")
	errIssuer          = bearerFailure("invalid_token", "wrong issuer")
	errAudience        = bearerFailure("invalid_token", "wrong audience")
	errExpired         = bearerFailure("invalid_token", "token expired")
	errNoExpiry        = bearerFailure("invalid_token", "token has no expiry")
	errNotYetValid     = bearerFailure("invalid_token", "token not yet valid")
	errIssuedFuture    = bearerFailure("invalid_token", "token issued in the future")

	errMissingKey = &Failure{Status: 401, Reason: "missing API key", Challenge: `ApiKey ` + realm}
	errInvalidKey = &Failure{Status: 401, Reason: "invalid API key", Challenge: `ApiKey ` + realm + `, error="invalid_key"`}
	errMultiKey   = &Failure{Status: 401, Reason: "more than one API key", Challenge: `ApiKey ` + realm + `, error="invalid_request"`}
)
