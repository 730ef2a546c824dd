package auth

import (
	"hash/maphash"
	"sync"
	"time"
)

// A verified-token cache: checking an Ed25519 or RSA signature costs tens
// of microseconds, and a client sends the same bearer token on request
// after request. A token is cached, by its exact bytes, only after it was
// fully verified; an entry is served only while
//   - the key set it was verified with is still the current one (a JWKS
//     refresh or rotation makes every entry verify again),
//   - that key set is usable (not past jwks_max_stale_ms),
//   - the token is unexpired (exp plus the leeway), and
//   - it is younger than tokenCacheTTL.
//
// The deny channel is checked after authentication on every request, so a
// revoked jti or subject is refused even while its token is cached.
//
// Tokens are spread over the shards by a seeded hash of all their bytes:
// the last character alone (a base64 letter of the signature) takes only
// 4 values for Ed25519, P-256 and RSA signatures, which left 2 of 16
// shards, an eighth of the capacity, in use.
const (
	tokenCacheTTL    = time.Minute
	tokenCacheShards = 16
	tokenCacheMax    = 4096                             // entries per shard; a full shard drops a random entry
	tokenCacheCap    = tokenCacheShards * tokenCacheMax // 65,536 per policy
)

// tokenSeed keys the shard hash; it is random per process, so which tokens
// share a shard cannot be chosen from outside.
var tokenSeed = maphash.MakeSeed()

type tokenCache struct {
	shards [tokenCacheShards]tokenShard
}

type tokenShard struct {
	mu sync.RWMutex
	m  map[string]cachedToken
}

type cachedToken struct {
	id    Identity
	keys  *keySet
	until time.Time
}

func shardOf(tok string) int {
	return int(maphash.String(tokenSeed, tok) % tokenCacheShards)
}

// sizes returns how many entries each shard holds.
func (c *tokenCache) sizes() (per [tokenCacheShards]int, total int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		per[i] = len(sh.m)
		sh.mu.RUnlock()
		total += per[i]
	}
	return per, total
}

func (c *tokenCache) get(tok string, keys *keySet, now time.Time) (Identity, bool) {
	sh := &c.shards[shardOf(tok)]
	sh.mu.RLock()
	e, ok := sh.m[tok]
	sh.mu.RUnlock()
	if !ok || e.keys != keys || !now.Before(e.until) {
		return Identity{}, false
	}
	return e.id, true
}

func (c *tokenCache) put(tok string, id Identity, keys *keySet, until time.Time) {
	sh := &c.shards[shardOf(tok)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m == nil {
		sh.m = make(map[string]cachedToken)
	}
	if len(sh.m) >= tokenCacheMax {
		for k := range sh.m { // map order is random: drop a random entry
			delete(sh.m, k)
			break
		}
	}
	sh.m[tok] = cachedToken{id: id, keys: keys, until: until}
}
