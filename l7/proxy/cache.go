package proxy

import "github.com/rampart-edge/rampart/l7/cache"

// CacheStore is the proxy's response cache store (nil until a snapshot
// with a cached route was applied): what purges remove from.
func (p *Proxy) CacheStore() *cache.Store { return p.metrics.stage.CacheStore() }
