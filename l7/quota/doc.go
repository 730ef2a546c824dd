// Package quota enforces a snapshot's quota policies: a token bucket per
// (policy, key), kept in this process (store: local) or shared by the
// proxies of a region through Redis (store: redis).
//
// # Algorithm
//
// Each key has a bucket of capacity burst that refills continuously at the
// policy's rate (tokens per second); a request takes one token and is
// refused when less than one is left. A bucket is created full. Over any
// window of length w a key is therefore admitted at most burst + rate×w
// requests, and exactly that many when it asks often enough. State is two
// numbers: the tokens left and when they were counted.
//
// # Regional split
//
// A policy's rate is rate_per_second, or, with regional set,
// global_rate_per_second × shares[region] for the region the proxy runs in
// (New's region argument). A region that is
// missing from shares (or whose share is 0, or an empty region) gets no
// budget: every request of that policy is refused (429), and New logs a
// warning naming the policy and the region. This is the conservative
// reading of "a global budget split into shares": a region nobody budgeted
// must not spend budget that belongs to others. Burst is per region as
// configured.
//
// # Global leases
//
// A policy with global set has no rate of its own: the control plane
// leases each region a part of the global rate (format/regionstate
// QuotaLease: per second, burst, the region's ready node count, expiry),
// and the Limiter reads the lease of its region from the region state in
// force (Options.Leases) on every Take, so a new document takes effect at
// once. With local buckets each proxy enforces the lease divided by the
// lease's node count (burst likewise, at least 1); with the Redis store
// the region's bucket holds the whole lease, and fail open falls back to
// the divided local bucket. When the lease has expired unrenewed (the
// control plane is gone), or there is no lease or document at all, the
// policy enforces floor_share_percent of the global rate (burst scaled
// alike), divided by the node count of the expired lease (1 without
// one); a floor of 0 refuses every request then. A changed lease changes
// the rate and burst of the existing buckets (tokens above a smaller
// burst are cut), so rebalancing never refills them.
//
// # Keys
//
// BuildKey joins the policy's key parts with 0x1f, escaping 0x1e and 0x1f
// inside values, so different values never give the same key. A part the
// request lacks (no tenant, no such header, claim or parameter) is written
// as a marker that no value can produce: all requests lacking that part
// share one bucket (per the values of the other parts), so leaving a header
// out cannot escape the limit. BuildKey reports ok=false then, for logs or
// metrics; the caller still calls Take with the key.
//
// # Local store
//
// Buckets live in sharded maps, each shard behind its own mutex, with an
// LRU list per shard. The number of buckets per policy is bounded by
// Options.MaxKeys. An insert first drops buckets at the LRU end that have
// refilled and been idle for a minute (a full bucket is the same as no
// bucket, so that loses nothing); a full shard then evicts, among its four
// least recently used buckets, one that has refilled, else the least
// recently used one (whose key then starts again with a full bucket). Take
// on an existing key does not allocate.
//
// # Redis store
//
// The bucket is a hash {tk: tokens, ts: microseconds} updated by one Lua
// script (EVALSHA, falling back to EVAL when the server lost the script).
// A script runs atomically in Redis, so concurrent proxies never both spend
// the same token. The script reads the server's clock (TIME), so proxies
// with skewed clocks agree, never refills when the clock goes backwards,
// and PEXPIREs the key a second after it would be full again (a full bucket
// is the same as a missing one). Every proxy of a region uses the same
// Redis key for the same (policy, region, key) — prefix + policy id + 0x1f +
// region + 0x1f + key — so together they stay within the regional budget,
// and two regions sharing one Redis do not share a bucket.
//
// # Fail modes and bounds
//
// Each Redis call is bounded by the policy's timeout_ms through its context:
// dial (one attempt), the wait for one of at most 64 pooled connections,
// write, read and at most one retry on a fresh connection all share that
// deadline. When a call fails or times out the request is decided by
// fail_mode and its Decision is marked Degraded:
//
//   - open: the request is admitted if this proxy's own local bucket (same
//     rate and burst, consulted only while degraded) admits it. That floor
//     keeps one proxy alone within the regional budget; N proxies together
//     may admit up to N times the budget while Redis is unreachable.
//   - closed: the request is refused (429).
//
// After a failure the address is marked down for 250 ms: requests are
// decided by fail_mode at once, without waiting on Redis, and then a single
// request probes it again. So Redis being down costs at most one timeout
// per address per 250 ms, never one per request. Redis replies that are
// errors (say, a key of the wrong type) are Degraded too but do not mark
// the address down. Going down and coming back are logged once each (Warn,
// Info); go-redis's own log lines go to the first Limiter's logger at
// debug level.
//
// # Snapshot swaps
//
// New(policies, region, prev, opts) carries each policy's bucket state over
// from prev when its id, effective rate, burst, key parts and store are
// unchanged; a changed policy starts with full local buckets (Redis buckets
// stay, their tokens capped by the new burst). Redis clients are
// shared by address and reference-counted: the new Limiter reuses prev's
// client for an unchanged address, and a client is closed when the last
// Limiter using it is closed.
//
// # Outcomes
//
// Options.Observe, when set, is called on every Take of a known policy with
// "allowed" or "limited", and additionally with "store_error" when the
// decision was Degraded and with "floor" when a global policy decided by
// its floor share; the proxy turns these into metrics.
package quota
