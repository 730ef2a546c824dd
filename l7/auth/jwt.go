package auth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// MaxTokenBytes bounds a bearer token; a longer one fails with 401.
const MaxTokenBytes = 16 << 10

// maxKidless is how many keys a token without kid may be tried against.
const maxKidless = 4

var b64 = base64.RawURLEncoding.Strict()

// jwtPolicy verifies bearer tokens.
type jwtPolicy struct {
	issuer      string
	audiences   []string
	allowed     []*alg
	leeway      time.Duration
	maxStale    time.Duration
	refetchGap  time.Duration
	tenantClaim string
	scopesClaim string
	src         *source // keys from jwks_url, or
	static      *keySet // keys from jwks_file
	types       tokenTypes
	now         func() time.Time
	cache       tokenCache
}

// scratch buffers hold a token's bytes and decoded segments while it is
// verified (sync.Pool: per-P caches, no global lock).
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func (j *jwtPolicy) authenticate(policyID string, vals []string) (Identity, error) {
	if len(vals) == 0 || (len(vals) == 1 && vals[0] == "") {
		return Identity{}, errMissingBearer
	}
	if len(vals) > 1 {
		return Identity{}, errMultipleHeaders
	}
	v := vals[0]
	if len(v) < 7 || !strings.EqualFold(v[:6], "bearer") || v[6] != ' ' {
		if strings.EqualFold(strings.TrimSpace(v), "bearer") {
			return Identity{}, errMalformed
		}
		return Identity{}, errMissingBearer // another scheme: no bearer credential (RFC 6750 §3.1)
	}
	tok := strings.TrimLeft(v[7:], " ")
	if len(tok) > MaxTokenBytes {
		return Identity{}, errTooLarge
	}
	if tok == "" {
		return Identity{}, errMalformed
	}
	now := j.now()
	if ks, _ := j.keys(false); ks != nil {
		if id, ok := j.cache.get(tok, ks, now); ok {
			return id, nil
		}
	}
	d1 := strings.IndexByte(tok, '.')
	if d1 <= 0 {
		return Identity{}, errMalformed
	}
	d2 := strings.IndexByte(tok[d1+1:], '.') + d1 + 1
	if d2 <= d1+1 || strings.IndexByte(tok[d2+1:], '.') >= 0 {
		return Identity{}, errMalformed
	}
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	if need := 2*len(tok) + verifyScratch; cap(*bp) < need {
		*bp = make([]byte, 0, need)
	}
	full := append((*bp)[:0], tok...)
	input := full[:d2] // the JWS signing input: header.payload
	free := full[len(full):cap(full)]
	hdr, free, ok := decodeSegment(full[:d1], free)
	if !ok {
		return Identity{}, errMalformed
	}
	a, kid, fail := j.header(hdr)
	if fail != nil {
		return Identity{}, fail
	}
	sig, free, ok := decodeSegment(full[d2+1:], free)
	if !ok || len(sig) == 0 {
		return Identity{}, errSignature
	}
	ks, fail := j.checkSignature(a, kid, input, sig, free)
	if fail != nil {
		return Identity{}, fail
	}
	payload, _, ok := decodeSegment(full[d1+1:d2], free)
	if !ok || !json.Valid(payload) {
		return Identity{}, errClaims
	}
	id := Identity{PolicyID: policyID, Issuer: j.issuer, payload: tok[d1+1 : d2]}
	if fail := j.claims(payload, &id); fail != nil {
		return Identity{}, fail
	}
	until := id.ExpiresAt.Add(j.leeway)
	if cap := now.Add(tokenCacheTTL); cap.Before(until) {
		until = cap
	}
	j.cache.put(tok, id, ks, until)
	return id, nil
}

func decodeSegment(seg, dst []byte) (out, rest []byte, ok bool) {
	n, err := b64.Decode(dst[:cap(dst)], seg)
	if err != nil {
		return nil, nil, false
	}
	return dst[:n], dst[n:], true
}

// header checks the JOSE header (typ, crit, cty) and returns the
// algorithm and kid.
func (j *jwtPolicy) header(hdr []byte) (*alg, []byte, *Failure) {
	if !json.Valid(hdr) {
		return nil, nil, errMalformed
	}
	m, ok := newMembers(hdr)
	if !ok {
		return nil, nil, errMalformed
	}
	var algRaw, kid, typ []byte
	hasTyp := false
	for k, v, more := m.next(); more; k, v, more = m.next() {
		switch {
		case keyIs(k, "alg"):
			if algRaw != nil {
				return nil, nil, errMalformed
			}
			if algRaw, ok = stringValue(v); !ok {
				return nil, nil, errMalformed
			}
		case keyIs(k, "kid"):
			if kid != nil {
				return nil, nil, errMalformed
			}
			if kid, ok = stringValue(v); !ok {
				return nil, nil, errMalformed
			}
		case keyIs(k, "typ"):
			if hasTyp {
				return nil, nil, errMalformed
			}
			if typ, hasTyp = stringValue(v); !hasTyp {
				return nil, nil, errMalformed
			}
		case keyIs(k, "crit"):
			return nil, nil, errUnsupported // no extension is understood
		case keyIs(k, "cty"):
			if s, _ := stringValue(v); strings.EqualFold(string(s), "JWT") {
				return nil, nil, errUnsupported // nested tokens are not accepted
			}
		}
	}
	if !j.types.ok(typ, hasTyp) {
		return nil, nil, errType
	}
	for _, a := range j.allowed {
		if string(algRaw) == a.name {
			return a, kid, nil
		}
	}
	return nil, nil, errAlgorithm // "none" and anything not pinned
}

// checkSignature finds the key for kid and verifies. An unknown kid, or a
// key set that is missing or stale, may cause one rate-limited refetch.
func (j *jwtPolicy) checkSignature(a *alg, kid, input, sig, tmp []byte) (*keySet, *Failure) {
	ks, fail := j.keys(false)
	if ks == nil {
		return nil, fail
	}
	if fail = tryKeys(ks, a, kid, input, sig, tmp); fail != errUnknownKey || j.src == nil {
		return ks, fail
	}
	if ks, fail = j.keys(true); ks == nil {
		return nil, fail
	}
	return ks, tryKeys(ks, a, kid, input, sig, tmp)
}

func tryKeys(ks *keySet, a *alg, kid, input, sig, tmp []byte) *Failure {
	if kid != nil {
		k := ks.lookup(string(kid), a)
		if k == nil {
			return errUnknownKey
		}
		if !verify(a, k, input, sig, tmp) {
			return errSignature
		}
		return nil
	}
	tried := 0
	for _, k := range ks.all {
		if !k.fits(a) {
			continue
		}
		if tried++; tried > maxKidless {
			break
		}
		if verify(a, k, input, sig, tmp) {
			return nil
		}
	}
	if tried == 0 {
		return errUnknownKey
	}
	return errSignature
}

// keys returns the usable key set, refetching first when asked to (or
// when the set is missing or stale), within the policy's rate limit.
func (j *jwtPolicy) keys(refetch bool) (*keySet, *Failure) {
	if j.static != nil {
		return j.static, nil
	}
	ks := j.src.keys.Load()
	usable := ks != nil && j.now().Sub(ks.fetchedAt) <= j.maxStale
	if usable && !refetch {
		return ks, nil
	}
	if j.src.refetch(j.refetchGap) {
		ks = j.src.keys.Load()
		usable = ks != nil && j.now().Sub(ks.fetchedAt) <= j.maxStale
	}
	if !usable {
		return nil, errKeysUnavailable
	}
	return ks, nil
}

// claims checks iss, aud, exp, nbf and iat and fills the identity.
func (j *jwtPolicy) claims(payload []byte, id *Identity) *Failure {
	m, ok := newMembers(payload)
	if !ok {
		return errClaims
	}
	names := [...]string{"iss", "aud", "exp", "nbf", "iat", "sub", "jti", j.tenantClaim, j.scopesClaim}
	var vals [len(names)][]byte
	for k, v, more := m.next(); more; k, v, more = m.next() {
		for i, n := range names {
			if keyIs(k, n) {
				if vals[i] != nil {
					return errClaims // duplicate claim names (RFC 7519 §4)
				}
				vals[i] = v
			}
		}
	}
	iss, aud, exp, nbf, iat := vals[0], vals[1], vals[2], vals[3], vals[4]
	if s, ok := stringValue(iss); !ok || string(s) != j.issuer {
		return errIssuer
	}
	if !j.audienceOK(aud) {
		return errAudience
	}
	now := j.now()
	if exp == nil {
		return errNoExpiry
	}
	t, ok := numericDate(exp)
	if !ok {
		return errClaims
	}
	if !now.Before(t.Add(j.leeway)) {
		return errExpired
	}
	id.ExpiresAt = t
	if nbf != nil {
		if t, ok = numericDate(nbf); !ok {
			return errClaims
		}
		if now.Add(j.leeway).Before(t) {
			return errNotYetValid
		}
	}
	if iat != nil {
		if t, ok = numericDate(iat); !ok {
			return errClaims
		}
		if now.Add(j.leeway).Before(t) {
			return errIssuedFuture
		}
	}
	return fillIdentity(id, vals[5], vals[6], vals[7], vals[8])
}

func (j *jwtPolicy) audienceOK(aud []byte) bool {
	if len(aud) == 0 {
		return false
	}
	if aud[0] == '"' {
		s, ok := stringValue(aud)
		return ok && j.wantAudience(s)
	}
	e, ok := newElements(aud)
	if !ok {
		return false
	}
	for v, more := e.nextElem(); more; v, more = e.nextElem() {
		if s, ok := stringValue(v); ok && j.wantAudience(s) {
			return true
		}
	}
	return false
}

func (j *jwtPolicy) wantAudience(s []byte) bool {
	for _, a := range j.audiences {
		if string(s) == a {
			return true
		}
	}
	return false
}
