package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Role is what a token may do.
type Role string

const (
	RoleAdmin Role = "admin" // everything
	RoleRead  Role = "read"  // every GET of the operator API
	RoleNode  Role = "node"  // the node endpoints: watch, deny watch, status
)

// Token is a bearer token known by the SHA-256 of its text.
type Token struct {
	Name   string
	Role   Role
	SHA256 [32]byte
}

// HashToken returns the SHA-256 of a token in hex, as config files hold it.
func HashToken(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// ParseTokenHash reads a 64-hex-digit SHA-256.
func ParseTokenHash(h string) ([32]byte, error) {
	var out [32]byte
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return out, fmt.Errorf("token sha256 %.16q… is not 64 hex digits", h)
	}
	copy(out[:], b)
	return out, nil
}

// authenticate returns the token the request carries, comparing hashes
// in constant time against every known token.
func (a *API) authenticate(r *http.Request) (Token, bool) {
	h := r.Header.Get("Authorization")
	raw, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || raw == "" {
		return Token{}, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(raw)))
	var found Token
	hit := 0
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.SHA256[:]) == 1 {
			found, hit = t, 1
		}
	}
	return found, hit == 1
}

func allowed(have, need Role) bool {
	switch have {
	case RoleAdmin:
		return true
	case RoleRead:
		return need == RoleRead
	default:
		return have == need
	}
}

// guard wraps a handler with the role it needs.
func (a *API) guard(need Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, ok := a.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rampart-control"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{Error: "a valid bearer token is required"})
			return
		}
		if !allowed(t.Role, need) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: fmt.Sprintf("token %q (role %s) may not do this (needs %s)", t.Name, t.Role, need)})
			return
		}
		h(w, r)
	}
}

// NewToken returns a random token (32 bytes, base64url) and its SHA-256
// in hex, for a config file's tokens list.
func NewToken() (token, sha string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("new token: %w", err)
	}
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}
