package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// MaxAPIKeyBytes bounds a presented API key; a longer one is invalid.
const MaxAPIKeyBytes = 4096

// apiKeyPolicy finds a presented key by the SHA-256 of it.
//
// The lookup is constant time in everything an attacker can learn from:
// the map is keyed by a salted hash of the key's hash (salt random per
// policy, never exposed), so which bucket is probed and how far the map's
// own comparison gets reveal nothing about the stored hashes; the
// decision is then subtle.ConstantTimeCompare of the full 32-byte hashes.
// This stays O(1) with many keys, where iterating over every key with a
// constant-time compare would cost O(n) per request.
type apiKeyPolicy struct {
	salt  [32]byte
	index map[uint64][]*apiKey
}

type apiKey struct {
	hash   [32]byte
	id     string
	tenant string
	scopes []string
}

func (p *Policy) buildAPIKey(c *snapshot.APIKeyPolicy) error {
	a := &apiKeyPolicy{index: make(map[uint64][]*apiKey, len(c.Keys))}
	if _, err := rand.Read(a.salt[:]); err != nil {
		return fmt.Errorf("api_key salt: %w", err)
	}
	if len(c.Keys) == 0 {
		return fmt.Errorf("api_key needs at least one key")
	}
	for _, k := range c.Keys {
		b, err := hex.DecodeString(k.SHA256)
		if err != nil || len(b) != sha256.Size {
			return fmt.Errorf("api_key %q: sha256 must be 64 hex digits", k.ID)
		}
		key := &apiKey{id: k.ID, tenant: k.Tenant, scopes: append([]string(nil), k.Scopes...)}
		copy(key.hash[:], b)
		slot := a.slot(&key.hash)
		a.index[slot] = append(a.index[slot], key)
	}
	p.header = http.CanonicalHeaderKey(cmp(c.Header, "X-Api-Key"))
	p.apiKey = a
	return nil
}

func (a *apiKeyPolicy) slot(hash *[32]byte) uint64 {
	var in [64]byte
	copy(in[:32], a.salt[:])
	copy(in[32:], hash[:])
	s := sha256.Sum256(in[:])
	return binary.LittleEndian.Uint64(s[:8])
}

func (a *apiKeyPolicy) authenticate(policyID string, vals []string) (Identity, error) {
	if len(vals) == 0 || (len(vals) == 1 && vals[0] == "") {
		return Identity{}, errMissingKey
	}
	if len(vals) > 1 {
		return Identity{}, errMultiKey
	}
	if len(vals[0]) > MaxAPIKeyBytes {
		return Identity{}, errInvalidKey
	}
	var buf [256]byte
	hash := sha256.Sum256(append(buf[:0], vals[0]...))
	var found *apiKey
	for _, k := range a.index[a.slot(&hash)] {
		if subtle.ConstantTimeCompare(k.hash[:], hash[:]) == 1 {
			found = k
		}
	}
	if found == nil {
		return Identity{}, errInvalidKey
	}
	return Identity{PolicyID: policyID, KeyID: found.id, Tenant: found.tenant, Scopes: found.scopes}, nil
}
