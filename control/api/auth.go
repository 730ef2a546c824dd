package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/store"
)

// Role is what a token may do.
type Role string

const (
	RoleAdmin Role = "admin" // everything
	RoleRead  Role = "read"  // every GET of the operator API
	RoleNode  Role = "node"  // the node endpoints only: watch, deny watch, status
	// RoleMonitor may only push replica lags (POST /v1/platforms/{p}/lag):
	// the token a platform's monitoring holds.
	RoleMonitor Role = "monitor"
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

// principal is who a request speaks for.
type principal struct {
	name string // config token name, or "node <id>"
	role Role
	node string // a per-node token: the node id it is bound to
}

// authenticate finds who the request's bearer token is: a config token
// (hashes compared in constant time against every one), else a node's
// own token (looked up by its SHA-256). It answers 401 itself when there
// is no valid token, and false.
func (a *API) authenticate(w http.ResponseWriter, r *http.Request) (principal, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	raw = strings.TrimSpace(raw)
	if !ok || raw == "" {
		a.unauthorized(w, r, "", "a valid bearer token is required")
		return principal{}, false
	}
	sum := sha256.Sum256([]byte(raw))
	var found Token
	hit := 0
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.SHA256[:]) == 1 {
			found, hit = t, 1
		}
	}
	if hit == 1 {
		return principal{name: found.Name, role: found.Role}, true
	}
	c, err := a.p.NodeByToken(r.Context(), raw)
	switch {
	case errors.Is(err, store.ErrNotFound):
		a.unauthorized(w, r, "", "a valid bearer token is required")
		return principal{}, false
	case err != nil:
		a.fail(w, r, fmt.Errorf("check the bearer token: %w", err))
		return principal{}, false
	case c.Revoked():
		a.unauthorized(w, r, c.ID, fmt.Sprintf("the token of node %q was revoked at %s", c.ID, c.RevokedAt.Format(time.RFC3339)))
		return principal{}, false
	}
	return principal{name: "node " + c.ID, role: RoleNode, node: c.ID}, true
}

// unauthorized answers 401; on the node endpoints the attempt is listed
// among the refusals (under node, else the node the query names).
func (a *API) unauthorized(w http.ResponseWriter, r *http.Request, node, msg string) {
	if strings.HasPrefix(r.URL.Path, "/v1/node/") {
		if node == "" {
			node = r.URL.Query().Get("node")
		}
		a.refused.add(node, "401: "+msg)
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="rampart-control"`)
	writeJSON(w, http.StatusUnauthorized, errorBody{Error: msg})
}

func allowed(have, need Role) bool {
	switch have {
	case RoleAdmin:
		return need != RoleNode
	case RoleRead:
		return need == RoleRead
	default:
		return have == need
	}
}

// guard wraps a handler with the role it needs. The node endpoints take
// a node's token only (per-node, or a shared one where allowed), and
// check with nodeGuard that it speaks for the node it names.
func (a *API) guard(need Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := a.authenticate(w, r)
		if !ok {
			return
		}
		if !allowed(p.role, need) {
			writeJSON(w, http.StatusForbidden, errorBody{Error: fmt.Sprintf("token %q (role %s) may not do this (needs %s)", p.name, p.role, need)})
			return
		}
		h(w, withPrincipal(r, p))
	}
}

// who is the name of the token a guarded request came with.
func who(r *http.Request) string {
	p, _ := r.Context().Value(principalKey{}).(principal)
	return p.name
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
