package quota

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// DefaultMaxKeys bounds the local buckets of one policy when
// Options.MaxKeys is 0.
const DefaultMaxKeys = 100_000

// zeroBudgetRetry is what a refusal says to wait when the region has no
// budget at all.
const zeroBudgetRetry = time.Minute

// Options tune a Limiter; the zero value is usable.
type Options struct {
	Logger *slog.Logger     // default slog.Default()
	Now    func() time.Time // default time.Now; tests control the clock with it
	// MaxKeys bounds the local buckets per policy (default DefaultMaxKeys);
	// beyond it the least recently used bucket is evicted.
	MaxKeys int
	// Observe, when set, is called on every Take of a known policy with the
	// outcome "allowed" or "limited", and also with "store_error" when the
	// decision was Degraded and with "floor" when a global policy decided
	// by its floor share (no lease, or it expired). It must be fast and
	// safe for concurrent use.
	Observe func(policy, outcome string)
	// Leases returns the region state in force, whose quota leases global
	// policies enforce (the process's region.Live.State); nil, or a nil
	// state, means no lease: global policies enforce their floor share.
	Leases func() *regionstate.State
}

// Limiter decides requests against the quota policies of one snapshot. It
// is safe for concurrent use.
type Limiter struct {
	policies map[string]*policy
	base     time.Time // bucket times are ns since base, inherited across New
	now      func() time.Time
	observe  func(policy, outcome string)
	leases   func() *regionstate.State
	log      *slog.Logger
	maxKeys  int
	clients  map[string]*redisClient
	closed   sync.Once
}

// policy is one quota policy made ready for Take.
type policy struct {
	id    string
	parts []string
	store string
	rate  float64 // effective tokens per second in this region; 0: no budget
	burst int
	local *localStore  // the buckets (store local) or the fail-open floor (redis)
	redis *redisPolicy // store redis only
	// global is set for a global policy: rate and burst above are then
	// the global budget, and what is enforced follows the lease.
	global *globalPolicy
}

// Decision is the answer to one request.
type Decision struct {
	Allowed    bool
	Limit      int           // the bucket's capacity (burst); 0 for no budget
	Remaining  int           // whole tokens left after this request
	RetryAfter time.Duration // refused: when one token will be there
	Reset      time.Duration // when the bucket will be full again
	Degraded   bool          // the store was unreachable; fail_mode decided
}

// New builds a Limiter for policies in region. Bucket state and Redis
// clients of prev (which may be nil) are carried over as the package
// documentation describes; prev stays usable until it is closed.
func New(policies []snapshot.QuotaPolicy, region string, prev *Limiter, opts Options) (*Limiter, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultMaxKeys
	}
	l := &Limiter{policies: make(map[string]*policy, len(policies)), now: opts.Now,
		observe: opts.Observe, leases: opts.Leases, log: opts.Logger, maxKeys: opts.MaxKeys, clients: map[string]*redisClient{}}
	if prev != nil {
		l.base = prev.base
	} else {
		l.base = opts.Now()
	}
	for i := range policies {
		q := &policies[i]
		if _, dup := l.policies[q.ID]; dup {
			return nil, fmt.Errorf("quota policy %q: defined twice", q.ID)
		}
		p, err := newPolicy(q, region, opts.Logger)
		if err != nil {
			return nil, err
		}
		l.policies[q.ID] = p
	}
	// All checks passed: now take over state and clients.
	for _, p := range l.policies {
		var old *policy
		if prev != nil && prev.maxKeys == l.maxKeys {
			old = prev.policies[p.id]
		}
		if old != nil && old.local != nil && old.rate == p.rate && old.burst == p.burst &&
			old.store == p.store && slices.Equal(old.parts, p.parts) && sameGlobal(old.global, p.global) {
			p.local = old.local
		} else if p.rate > 0 {
			p.local = newLocalStore(p.rate, p.burst, l.maxKeys)
		}
		if p.redis != nil {
			p.redis.client = l.client(p.redis.addr, prev)
		}
	}
	return l, nil
}

func newPolicy(q *snapshot.QuotaPolicy, region string, log *slog.Logger) (*policy, error) {
	p := &policy{id: q.ID, parts: slices.Clone(q.Key), store: q.Store, rate: q.RatePerSecond, burst: q.Burst}
	if p.store == "" {
		p.store = "local"
	}
	if len(p.parts) == 0 {
		return nil, fmt.Errorf("quota policy %q: key needs at least one part", q.ID)
	}
	for _, part := range p.parts {
		if !validPart(part) {
			return nil, fmt.Errorf("quota policy %q: unknown key part %q", q.ID, part)
		}
	}
	if g := q.Global; g != nil {
		if g.RatePerSecond < 1 || g.RatePerSecond > 1e9 || g.Burst < 1 || g.Burst > 1e9 || g.FloorSharePercent < 0 || g.FloorSharePercent > 100 || q.Regional != nil {
			return nil, fmt.Errorf("quota policy %q: bad global budget (rate %d, burst %d, floor %d%%, regional set %v)",
				q.ID, g.RatePerSecond, g.Burst, g.FloorSharePercent, q.Regional != nil)
		}
		p.rate, p.burst = float64(g.RatePerSecond), int(g.Burst)
		p.global = &globalPolicy{id: q.ID, region: region, g: *g, redis: p.store == "redis"}
	} else if p.burst < 1 {
		return nil, fmt.Errorf("quota policy %q: burst %d must be at least 1", q.ID, p.burst)
	}
	switch r := q.Regional; {
	case p.global != nil: // the rate follows the lease
	case r != nil:
		share, ok := r.Shares[region]
		if !(r.GlobalRatePerSecond > 0) || math.IsInf(r.GlobalRatePerSecond, 0) || !(share >= 0 && share <= 1) {
			return nil, fmt.Errorf("quota policy %q: bad regional budget (global %v, share of %q %v)",
				q.ID, r.GlobalRatePerSecond, region, share)
		}
		p.rate = r.GlobalRatePerSecond * share
		if !ok || share == 0 {
			log.Warn("quota: region has no share of the policy's global budget; every request under it is refused (429)",
				"policy", q.ID, "region", region)
		}
	case !(p.rate > 0) || math.IsInf(p.rate, 0):
		return nil, fmt.Errorf("quota policy %q: rate_per_second %v must be above 0", q.ID, p.rate)
	}
	switch p.store {
	case "local":
	case "redis":
		rp, err := newRedisPolicy(q, region, p.rate)
		if err != nil {
			return nil, err
		}
		p.redis = rp
	default:
		return nil, fmt.Errorf("quota policy %q: store %q must be local or redis", q.ID, p.store)
	}
	return p, nil
}

// Take spends one token of key's bucket under the policy policyID. A Take
// on a local policy never blocks beyond a shard mutex; one on a Redis
// policy waits at most the policy's timeout_ms. An unknown policy (or a
// nil Limiter) admits the request with Limit 0.
func (l *Limiter) Take(ctx context.Context, policyID string, key []byte) Decision {
	if l == nil {
		return Decision{Allowed: true}
	}
	p := l.policies[policyID]
	if p == nil {
		return Decision{Allowed: true}
	}
	at := l.now()
	now := int64(at.Sub(l.base))
	var d Decision
	floor := false
	switch {
	case p.global != nil:
		v := p.global.view(l.state(), now, at, l.base)
		floor = !v.leased
		d = l.takeGlobal(ctx, p, v, key, now)
	case p.rate <= 0:
		d = Decision{RetryAfter: zeroBudgetRetry, Reset: zeroBudgetRetry}
	case p.redis != nil:
		d = l.takeRedis(ctx, p, p.redis.args, p.burst, p.rate, key, now)
	default:
		d = decide(p.local.take(key, now), p.rate, p.burst)
	}
	if l.observe != nil {
		if d.Degraded {
			l.observe(p.id, "store_error")
		}
		if floor {
			l.observe(p.id, "floor")
		}
		if d.Allowed {
			l.observe(p.id, "allowed")
		} else {
			l.observe(p.id, "limited")
		}
	}
	return d
}

// decide turns the answer of a bucket of rate and burst into a Decision.
func decide(r result, rate float64, burst int) Decision {
	d := Decision{Allowed: r.allowed, Limit: burst,
		Remaining: max(0, int(math.Floor(r.tokens+epsilon))),
		Reset:     seconds((float64(burst) - r.tokens) / rate)}
	if !r.allowed {
		d.RetryAfter = seconds((1 - r.tokens) / rate)
	}
	return d
}

// takeGlobal decides a request of a global policy under its lease view v:
// no budget (a floor of 0 with no lease) refuses; local buckets run at
// the lease divided by the region's nodes; the Redis bucket at the whole
// regional lease, with the divided local bucket as its fail-open floor.
func (l *Limiter) takeGlobal(ctx context.Context, p *policy, v *leaseView, key []byte, now int64) Decision {
	if !(v.regionalRate > 0) {
		return Decision{RetryAfter: zeroBudgetRetry, Reset: zeroBudgetRetry}
	}
	p.local.setLimits(v.rate, v.burst)
	if p.redis != nil {
		return l.takeRedis(ctx, p, v.args, int(v.regionalBurst), v.rate, key, now)
	}
	return decide(p.local.take(key, now), v.rate, int(v.burst))
}

// sameGlobal reports whether two policies' global budgets are the same
// (both nil: neither is global).
func sameGlobal(a, b *globalPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.g == b.g && a.region == b.region && a.redis == b.redis
}

// seconds converts s seconds to a Duration, rounding up to the nanosecond
// (ignoring float noise far below it) and saturating.
func seconds(s float64) time.Duration {
	ns := math.Ceil(s*1e9 - 1e-3)
	switch {
	case !(ns > 0):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Close releases the Limiter's Redis clients (each is closed when no
// Limiter uses it any more). It is idempotent; Take keeps working on local
// policies after it, and Redis policies then decide by fail_mode.
func (l *Limiter) Close() error {
	if l == nil {
		return nil
	}
	var err error
	l.closed.Do(func() {
		for _, c := range l.clients {
			if e := c.release(); e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}
