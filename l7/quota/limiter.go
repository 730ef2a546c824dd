package quota

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

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
	// decision was Degraded. It must be fast and safe for concurrent use.
	Observe func(policy, outcome string)
}

// Limiter decides requests against the quota policies of one snapshot. It
// is safe for concurrent use.
type Limiter struct {
	policies map[string]*policy
	base     time.Time // bucket times are ns since base, inherited across New
	now      func() time.Time
	observe  func(policy, outcome string)
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
		observe: opts.Observe, log: opts.Logger, maxKeys: opts.MaxKeys, clients: map[string]*redisClient{}}
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
			old.store == p.store && slices.Equal(old.parts, p.parts) {
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
	if p.burst < 1 {
		return nil, fmt.Errorf("quota policy %q: burst %d must be at least 1", q.ID, p.burst)
	}
	if r := q.Regional; r != nil {
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
	} else if !(p.rate > 0) || math.IsInf(p.rate, 0) {
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
	now := int64(l.now().Sub(l.base))
	var d Decision
	switch {
	case p.rate <= 0:
		d = Decision{RetryAfter: zeroBudgetRetry, Reset: zeroBudgetRetry}
	case p.redis != nil:
		d = l.takeRedis(ctx, p, key, now)
	default:
		d = p.decide(p.local.take(key, now))
	}
	if l.observe != nil {
		if d.Degraded {
			l.observe(p.id, "store_error")
		}
		if d.Allowed {
			l.observe(p.id, "allowed")
		} else {
			l.observe(p.id, "limited")
		}
	}
	return d
}

// decide turns a bucket's answer into a Decision.
func (p *policy) decide(r result) Decision {
	d := Decision{Allowed: r.allowed, Limit: p.burst,
		Remaining: max(0, int(math.Floor(r.tokens+epsilon))),
		Reset:     seconds((float64(p.burst) - r.tokens) / p.rate)}
	if !r.allowed {
		d.RetryAfter = seconds((1 - r.tokens) / p.rate)
	}
	return d
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
