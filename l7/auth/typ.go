package auth

import (
	"bytes"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// tokenTypes is a policy's rule for the JOSE header's "typ" (RFC 8725
// §3.11): tokens of another kind from the same issuer and keys (ID
// tokens, logout tokens, security events) must not pass as access tokens.
type tokenTypes struct {
	allowed  [][]byte // canonical (snapshot.CanonicalJWTType) forms
	required bool     // a token without typ fails
}

func newTokenTypes(c *snapshot.JWTPolicy) tokenTypes {
	names := c.AllowedTypes
	if len(names) == 0 {
		names = snapshot.DefaultJWTTypes
	}
	tt := tokenTypes{required: c.RequireType}
	for _, n := range names {
		tt.allowed = append(tt.allowed, []byte(snapshot.CanonicalJWTType(n)))
	}
	return tt
}

var applicationPrefix = []byte("application/")

// ok reports whether a token whose header has typ (present says whether it
// has one at all) is accepted. Media types compare case-insensitively and
// "application/x" equals "x" (RFC 7515 §4.1.9); no allocation.
func (tt *tokenTypes) ok(typ []byte, present bool) bool {
	if !present {
		return !tt.required
	}
	if len(typ) > len(applicationPrefix) && bytes.EqualFold(typ[:len(applicationPrefix)], applicationPrefix) &&
		bytes.IndexByte(typ[len(applicationPrefix):], '/') < 0 {
		typ = typ[len(applicationPrefix):]
	}
	for _, a := range tt.allowed {
		if bytes.EqualFold(typ, a) {
			return true
		}
	}
	return false
}
