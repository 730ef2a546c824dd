package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

type family uint8

const (
	famRSA family = iota + 1
	famRSAPSS
	famEC
	famEdDSA
	famHMAC
)

// alg is one JWS algorithm: which key family verifies it, with which hash.
type alg struct {
	name  string
	fam   family
	hash  crypto.Hash
	curve elliptic.Curve // famEC
	size  int            // famEC: bytes of r and of s; famHMAC: least secret length
}

var algs = map[string]*alg{
	"RS256": {name: "RS256", fam: famRSA, hash: crypto.SHA256},
	"RS384": {name: "RS384", fam: famRSA, hash: crypto.SHA384},
	"RS512": {name: "RS512", fam: famRSA, hash: crypto.SHA512},
	"PS256": {name: "PS256", fam: famRSAPSS, hash: crypto.SHA256},
	"PS384": {name: "PS384", fam: famRSAPSS, hash: crypto.SHA384},
	"PS512": {name: "PS512", fam: famRSAPSS, hash: crypto.SHA512},
	"ES256": {name: "ES256", fam: famEC, hash: crypto.SHA256, curve: elliptic.P256(), size: 32},
	"ES384": {name: "ES384", fam: famEC, hash: crypto.SHA384, curve: elliptic.P384(), size: 48},
	"ES512": {name: "ES512", fam: famEC, hash: crypto.SHA512, curve: elliptic.P521(), size: 66},
	"EdDSA": {name: "EdDSA", fam: famEdDSA},
	"HS256": {name: "HS256", fam: famHMAC, hash: crypto.SHA256, size: 32},
	"HS384": {name: "HS384", fam: famHMAC, hash: crypto.SHA384, size: 48},
	"HS512": {name: "HS512", fam: famHMAC, hash: crypto.SHA512, size: 64},
}

// minRSABits is the smallest RSA modulus a key set may use.
const minRSABits = 2048

// vkey is one verification key, already in the type its family needs:
// a key can only ever verify the algorithms of its own family, so an RSA
// public key can never be used as an HMAC secret.
type vkey struct {
	kid  string
	alg  string // the key's own "alg", when the set names one: then only that
	rsa  *rsa.PublicKey
	ec   *ecdsa.PublicKey
	ed   ed25519.PublicKey
	hmac []byte
}

func (k *vkey) fits(a *alg) bool {
	if k.alg != "" && k.alg != a.name {
		return false
	}
	switch a.fam {
	case famRSA, famRSAPSS:
		return k.rsa != nil
	case famEC:
		return k.ec != nil && k.ec.Curve == a.curve
	case famEdDSA:
		return k.ed != nil
	case famHMAC:
		return k.hmac != nil && len(k.hmac) >= a.size
	}
	return false
}

// keySet is an immutable set of verification keys, by kid.
type keySet struct {
	byKid     map[string][]*vkey
	all       []*vkey
	fetchedAt time.Time // zero for key sets read from a file: never stale
}

func (ks *keySet) lookup(kid string, a *alg) *vkey {
	for _, k := range ks.byKid[kid] {
		if k.fits(a) {
			return k
		}
	}
	return nil
}

// newKeySet converts a parsed JWKS, skipping keys not meant for signature
// verification (use other than sig, key_ops without verify) and keys too
// weak or malformed to trust. It fails when no key is left.
func newKeySet(set jwk.Set, fetchedAt time.Time) (*keySet, []string, error) {
	ks := &keySet{byKid: map[string][]*vkey{}, fetchedAt: fetchedAt}
	var skipped []string
	for i := 0; i < set.Len(); i++ {
		k, _ := set.Key(i)
		vk, err := convertKey(k)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("key %d (kid %q): %v", i, k.KeyID(), err))
			continue
		}
		if vk == nil {
			continue
		}
		ks.byKid[vk.kid] = append(ks.byKid[vk.kid], vk)
		ks.all = append(ks.all, vk)
	}
	if len(ks.all) == 0 {
		return nil, skipped, fmt.Errorf("no usable signature verification key in a set of %d", set.Len())
	}
	return ks, skipped, nil
}

func convertKey(k jwk.Key) (*vkey, error) {
	if u := k.KeyUsage(); u != "" && u != "sig" {
		return nil, nil
	}
	if ops := k.KeyOps(); len(ops) > 0 {
		verify := false
		for _, op := range ops {
			verify = verify || op == jwk.KeyOpVerify
		}
		if !verify {
			return nil, nil
		}
	}
	vk := &vkey{kid: k.KeyID(), alg: k.Algorithm().String()}
	if vk.alg != "" && algs[vk.alg] == nil {
		return nil, fmt.Errorf("unsupported alg %q", vk.alg)
	}
	raw, err := jwk.PublicRawKeyOf(k)
	if err != nil {
		return nil, fmt.Errorf("not a usable key: %w", err)
	}
	switch pub := raw.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return nil, fmt.Errorf("RSA key of %d bits; at least %d needed", pub.N.BitLen(), minRSABits)
		}
		vk.rsa = pub
	case *ecdsa.PublicKey:
		if _, err := pub.ECDH(); err != nil { // checks the point is on its curve
			return nil, fmt.Errorf("bad EC key: %w", err)
		}
		vk.ec = pub
	case ed25519.PublicKey:
		if len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("bad Ed25519 key")
		}
		vk.ed = pub
	case []byte:
		if len(pub) == 0 {
			return nil, fmt.Errorf("empty secret")
		}
		vk.hmac = pub
	default:
		return nil, fmt.Errorf("unsupported key type %T", raw)
	}
	if vk.alg != "" && !vk.fits(algs[vk.alg]) {
		return nil, fmt.Errorf("alg %q does not match the key type", vk.alg)
	}
	return vk, nil
}

var pssOptions = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}

// verifyScratch is the room verify needs in tmp.
const verifyScratch = 64 + 2*(66+3) + 4

// verify checks sig over input with key k for algorithm a; k.fits(a).
// tmp (at least verifyScratch bytes, from the request's pooled buffer)
// holds the digest and DER signature, which the crypto packages' APIs
// would otherwise make escape to the heap.
func verify(a *alg, k *vkey, input, sig, tmp []byte) bool {
	if a.fam == famHMAC {
		return verifyHMAC(a, k, input, sig)
	}
	var digest []byte
	switch a.hash {
	case crypto.SHA256:
		s := sha256.Sum256(input)
		digest = append(tmp[:0], s[:]...)
	case crypto.SHA384:
		s := sha512.Sum384(input)
		digest = append(tmp[:0], s[:]...)
	case crypto.SHA512:
		s := sha512.Sum512(input)
		digest = append(tmp[:0], s[:]...)
	}
	switch a.fam {
	case famRSA:
		return rsa.VerifyPKCS1v15(k.rsa, a.hash, digest, sig) == nil
	case famRSAPSS:
		return rsa.VerifyPSS(k.rsa, a.hash, digest, sig, pssOptions) == nil
	case famEC:
		if len(sig) != 2*a.size {
			return false
		}
		der := tmp[64:64]
		return ecdsa.VerifyASN1(k.ec, digest, asn1Signature(der, sig[:a.size], sig[a.size:]))
	case famEdDSA:
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(k.ed, input, sig)
	}
	return false
}

func verifyHMAC(a *alg, k *vkey, input, sig []byte) bool {
	m := hmac.New(a.hash.New, k.hmac)
	m.Write(input)
	return hmac.Equal(m.Sum(nil), sig)
}

// asn1Signature encodes the fixed-size r and s of a JWS ECDSA signature
// (RFC 7518 §3.4) as the DER SEQUENCE{INTEGER r, INTEGER s} that
// ecdsa.VerifyASN1 takes.
func asn1Signature(dst, r, s []byte) []byte {
	r, s = trimInt(r), trimInt(s)
	n := intLen(r) + intLen(s)
	dst = append(dst, 0x30)
	if n >= 0x80 {
		dst = append(dst, 0x81)
	}
	dst = append(dst, byte(n))
	dst = appendInt(dst, r)
	return appendInt(dst, s)
}

func trimInt(b []byte) []byte {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

func intLen(b []byte) int {
	if b[0]&0x80 != 0 {
		return 3 + len(b)
	}
	return 2 + len(b)
}

func appendInt(dst, b []byte) []byte {
	dst = append(dst, 0x02)
	if b[0]&0x80 != 0 {
		return append(append(dst, byte(len(b)+1), 0), b...)
	}
	return append(append(dst, byte(len(b))), b...)
}

// parseKeySet parses JWKS bytes into a key set; one malformed key does not
// spoil the others.
func parseKeySet(data []byte, fetchedAt time.Time) (*keySet, []string, error) {
	set, err := jwk.Parse(data, jwk.WithIgnoreParseError(true))
	if err != nil {
		return nil, nil, fmt.Errorf("parse JWKS: %w", err)
	}
	return newKeySet(set, fetchedAt)
}
