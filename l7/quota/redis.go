package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// redisRetryInterval is how long an address stays marked down after a
// failed call before one request probes it again.
const redisRetryInterval = 250 * time.Millisecond

// redisPoolSize bounds the connections to one Redis address.
const redisPoolSize = 64

// tokenBucket takes one token of the bucket KEYS[1] (a hash: tk tokens, ts
// microseconds of the server clock) refilling at ARGV[1] tokens per second
// up to ARGV[2]. It returns {allowed 0|1, whole tokens left, µs until a
// token is there when refused, µs until the bucket is full}.
var tokenBucket = redis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', KEYS[1], 'tk', 'ts')
local tokens, ts = tonumber(v[1]), tonumber(v[2])
if tokens == nil or ts == nil then
  tokens, ts = burst, now
elseif now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1e6)
  ts = now
end
local allowed = 0
if tokens >= 1 - 1e-9 then
  tokens = tokens - 1
  allowed = 1
end
local cap = 1e15
local fill = math.min(math.ceil((burst - tokens) / rate * 1e6), cap)
local retry = 0
if allowed == 0 then retry = math.min(math.ceil((1 - tokens) / rate * 1e6), cap) end
redis.call('HSET', KEYS[1], 'tk', string.format('%.17g', tokens), 'ts', string.format('%d', ts))
redis.call('PEXPIRE', KEYS[1], string.format('%d', math.min(math.ceil(fill / 1000) + 1000, cap)))
return {allowed, math.max(0, math.floor(tokens + 1e-9)), retry, fill}
`)

// redisPolicy is the Redis side of a policy with store: redis.
type redisPolicy struct {
	addr     string
	timeout  time.Duration
	failOpen bool
	prefix   string // Prefix + policy id + 0x1f + region + 0x1f
	args     []any  // rate, burst
	client   *redisClient
}

func newRedisPolicy(q *snapshot.QuotaPolicy, region string, rate float64) (*redisPolicy, error) {
	r := q.Redis
	if r == nil || r.Address == "" {
		return nil, fmt.Errorf("quota policy %q: store redis needs redis.address", q.ID)
	}
	if r.FailMode != "open" && r.FailMode != "closed" {
		return nil, fmt.Errorf("quota policy %q: redis.fail_mode %q must be open or closed", q.ID, r.FailMode)
	}
	timeout := time.Duration(r.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = snapshot.DefaultRedisTimeoutMs * time.Millisecond
	}
	prefix := r.Prefix
	if prefix == "" {
		prefix = "rampart:quota:"
	}
	b := appendEscaped([]byte(prefix), q.ID)
	b = appendEscaped(append(b, keySep), region)
	b = append(b, keySep)
	return &redisPolicy{addr: r.Address, timeout: timeout, failOpen: r.FailMode == "open", prefix: string(b),
		args: []any{strconv.FormatFloat(rate, 'g', -1, 64), strconv.Itoa(q.Burst)}}, nil
}

// takeRedis decides a request of p, a Redis policy, in Redis (with the
// script's args, a bucket of capacity limit), or by its fail mode when
// Redis cannot answer (fail open: p's local bucket of localRate).
func (l *Limiter) takeRedis(ctx context.Context, p *policy, args []any, limit int, localRate float64, key []byte, now int64) Decision {
	rp := p.redis
	c := rp.client
	if ctx.Err() == nil && c.allow(now) {
		cctx, cancel := context.WithTimeout(ctx, rp.timeout)
		v, err := tokenBucket.Run(cctx, c.rdb, []string{rp.prefix + string(key)}, args...).Int64Slice()
		cancel()
		if err == nil && len(v) == 4 {
			c.up()
			return Decision{Allowed: v[0] == 1, Limit: limit, Remaining: int(v[1]),
				RetryAfter: time.Duration(v[2]) * time.Microsecond, Reset: time.Duration(v[3]) * time.Microsecond}
		}
		var reply redis.Error
		if err != nil && !errors.As(err, &reply) && !errors.Is(err, redis.ErrClosed) && ctx.Err() == nil {
			c.down(int64(l.now().Sub(l.base)), err)
		}
	}
	if rp.failOpen {
		lim := p.local.lim.Load()
		d := decide(p.local.take(key, now), localRate, int(lim.burst))
		d.Degraded = true
		return d
	}
	return Decision{Limit: limit, RetryAfter: time.Second, Reset: time.Second, Degraded: true}
}

// clientsMu guards every redisClient's refs.
var clientsMu sync.Mutex

// redisClient is a connection pool to one address, shared by the Limiters
// that use it, with a simple breaker: after a failure the address is down
// until downUntil, then one caller probes it.
type redisClient struct {
	addr      string
	rdb       *redis.Client
	log       *slog.Logger
	refs      int
	downUntil atomic.Int64 // ns since the Limiters' base; 0 when up
}

// redisLogOnce sends go-redis's own log lines (a failed dial, say) to the
// first Limiter's logger at debug level instead of the standard logger;
// the Warn and Info lines on an address going down and coming back are
// the ones an operator needs.
var redisLogOnce sync.Once

type redisLog struct{ log *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.log.DebugContext(ctx, "quota: redis client: "+fmt.Sprintf(format, v...))
}

// client returns l's client for addr: prev's when it has one still open,
// else a new one.
func (l *Limiter) client(addr string, prev *Limiter) *redisClient {
	if c := l.clients[addr]; c != nil {
		return c
	}
	clientsMu.Lock()
	defer clientsMu.Unlock()
	var c *redisClient
	if prev != nil {
		if pc := prev.clients[addr]; pc != nil && pc.refs > 0 {
			c = pc
		}
	}
	if c == nil {
		redisLogOnce.Do(func() { redis.SetLogger(redisLog{l.log}) })
		c = &redisClient{addr: addr, log: l.log, rdb: redis.NewClient(&redis.Options{
			Addr:                     addr,
			Protocol:                 2,
			DisableIdentity:          true,
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			// Each call's context (timeout_ms) is the bound; these are backstops.
			ContextTimeoutEnabled: true,
			DialTimeout:           5 * time.Second,
			ReadTimeout:           5 * time.Second,
			WriteTimeout:          5 * time.Second,
			PoolTimeout:           5 * time.Second,
			DialerRetries:         1,
			MaxRetries:            1, // once on another connection, within the same deadline
			MinRetryBackoff:       -1,
			MaxRetryBackoff:       -1,
			PoolSize:              redisPoolSize,
			MaxActiveConns:        redisPoolSize,
		})}
	}
	c.refs++
	l.clients[addr] = c
	return c
}

// release drops one reference and closes the pool with the last.
func (c *redisClient) release() error {
	clientsMu.Lock()
	c.refs--
	last := c.refs == 0
	clientsMu.Unlock()
	if last {
		return c.rdb.Close()
	}
	return nil
}

// allow reports whether a call may go to Redis at now: always while up;
// while down, only the one caller that claims the probe after downUntil.
func (c *redisClient) allow(now int64) bool {
	d := c.downUntil.Load()
	if d == 0 {
		return true
	}
	return now >= d && c.downUntil.CompareAndSwap(d, now+int64(redisRetryInterval))
}

// down marks the address down after a failed call; the first failure
// after it was up is logged.
func (c *redisClient) down(now int64, err error) {
	if c.downUntil.Swap(max(1, now+int64(redisRetryInterval))) == 0 {
		c.log.Warn("quota: redis unreachable; quota policies on it decide by their fail_mode",
			"address", c.addr, "error", err, "retry_in", redisRetryInterval)
	}
}

// up marks the address up after a call succeeded.
func (c *redisClient) up() {
	if c.downUntil.Load() != 0 && c.downUntil.Swap(0) != 0 {
		c.log.Info("quota: redis reachable again", "address", c.addr)
	}
}
