package auth

import (
	"bytes"
	"strings"
)

// fillIdentity decodes sub, jti, the tenant claim and the scopes claim
// (raw JSON values, nil when absent) into id, with one allocation for all
// the strings and one for the scope slice.
func fillIdentity(id *Identity, subRaw, jtiRaw, tenantRaw, scopesRaw []byte) *Failure {
	var sub, jti, tenant []byte
	var ok bool
	if subRaw != nil {
		if sub, ok = stringValue(subRaw); !ok {
			return errClaims
		}
	}
	if jtiRaw != nil {
		if jti, ok = stringValue(jtiRaw); !ok {
			return errClaims
		}
	}
	if tenantRaw != nil {
		if tenantRaw[0] == '"' {
			tenant, ok = stringValue(tenantRaw)
		} else if c := tenantRaw[0]; c == '-' || (c >= '0' && c <= '9') {
			var s string
			s, ok = plainValue(tenantRaw)
			tenant = []byte(s)
		}
		if !ok {
			return errClaims
		}
	}
	var stack [512]byte
	b := append(append(append(stack[:0], sub...), jti...), tenant...)
	scopesAt := len(b)
	if scopesRaw != nil {
		var fail *Failure
		if b, fail = appendScopes(b, scopesRaw); fail != nil {
			return fail
		}
	}
	if len(b) == 0 {
		return nil
	}
	all := string(b)
	id.Subject = all[:len(sub)]
	id.JTI = all[len(sub) : len(sub)+len(jti)]
	id.Tenant = all[len(sub)+len(jti) : scopesAt]
	if scopes := all[scopesAt:]; scopes != "" {
		id.Scopes = make([]string, 0, strings.Count(scopes, " ")+1)
		for s := range strings.SplitSeq(scopes, " ") {
			if s != "" {
				id.Scopes = append(id.Scopes, s)
			}
		}
	}
	return nil
}

// appendScopes appends the scopes of a space-separated string or an array
// of strings to b, separated by spaces. Array elements that are empty or
// hold a space are dropped: they are not scope tokens (RFC 6749 §3.3) and
// splitting them could grant scopes the issuer never named.
func appendScopes(b, raw []byte) ([]byte, *Failure) {
	switch raw[0] {
	case '"':
		s, ok := stringValue(raw)
		if !ok {
			return nil, errClaims
		}
		return append(b, s...), nil
	case '[':
		e, ok := newElements(raw)
		if !ok {
			return nil, errClaims
		}
		for v, more := e.nextElem(); more; v, more = e.nextElem() {
			s, ok := stringValue(v)
			if !ok {
				return nil, errClaims
			}
			if len(s) == 0 || bytes.IndexByte(s, ' ') >= 0 {
				continue
			}
			b = append(append(b, s...), ' ')
		}
		return b, nil
	case 'n': // null: no scopes
		return b, nil
	}
	return nil, errClaims
}
