package quota

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func rawClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRedisBurstExact: a burst of requests at once admits exactly burst,
// sequentially and from many goroutines (the script is atomic).
func TestRedisBurstExact(t *testing.T) {
	srv := startRedis(t)
	for _, burst := range []int{1, 5, 100} {
		t.Run(fmt.Sprint("burst", burst), func(t *testing.T) {
			id := fmt.Sprint("seq", burst)
			l := mustNew(t, []snapshot.QuotaPolicy{redisQuota(id, srv.addr, 0.001, burst, "closed", 2000)}, "eu", nil, Options{})
			for i := range burst {
				d := l.Take(context.Background(), id, []byte("k"))
				if !d.Allowed || d.Degraded || d.Limit != burst || d.Remaining != burst-1-i {
					t.Fatalf("take %d: %+v", i, d)
				}
			}
			d := l.Take(context.Background(), id, []byte("k"))
			if d.Allowed || d.Degraded || d.RetryAfter <= 990*time.Second || d.RetryAfter > 1000*time.Second {
				t.Fatalf("refused take: %+v, want retry ≈ 1000 s", d)
			}
			if got := countAllowed(l, id, "k", burst); got != 0 {
				t.Fatalf("%d more admitted", got)
			}
		})
	}
	t.Run("concurrent", func(t *testing.T) {
		l := mustNew(t, []snapshot.QuotaPolicy{redisQuota("conc", srv.addr, 0.001, 50, "closed", 2000)}, "eu", nil, Options{})
		var got atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { got.Add(int64(countAllowed(l, "conc", "k", 25))) })
		}
		wg.Wait()
		if got.Load() != 50 {
			t.Fatalf("8 goroutines × 25 takes admitted %d, want burst 50", got.Load())
		}
	})
}

func TestRedisRefillAndKey(t *testing.T) {
	srv := startRedis(t)
	q := snapshot.QuotaPolicy{ID: "g", Key: []string{"tenant"}, Burst: 2, Store: "redis",
		Redis:    &snapshot.RedisStore{Address: srv.addr, TimeoutMs: 1000, FailMode: "closed", Prefix: "t:"},
		Regional: &snapshot.Regional{GlobalRatePerSecond: 100, Shares: map[string]float64{"eu": 0.25}}}
	l := mustNew(t, []snapshot.QuotaPolicy{q}, "eu", nil, Options{})
	d := l.Take(context.Background(), "g", []byte("k"))
	if !d.Allowed || d.Reset != 40*time.Millisecond {
		t.Fatalf("first take %+v, want reset 40ms (a token at 25/s)", d)
	}
	ttl, err := rawClient(t, srv.addr).PTTL(context.Background(), "t:g\x1feu\x1fk").Result()
	if err != nil || ttl <= 0 || ttl > 1040*time.Millisecond {
		t.Fatalf("PTTL of the bucket = %v, %v; want at most time to refill + 1 s", ttl, err)
	}
	start := time.Now()
	got := 1
	var refused Decision
	for time.Since(start) < 500*time.Millisecond {
		d := l.Take(context.Background(), "g", []byte("k"))
		if d.Allowed {
			got++
		} else {
			refused = d
		}
	}
	elapsed := time.Since(start)
	if max := 2 + int(25*elapsed.Seconds()) + 1; got > max || got < 3 {
		t.Fatalf("%d admitted in %v at 25/s burst 2, want 3..%d", got, elapsed, max)
	}
	if refused.RetryAfter <= 0 || refused.RetryAfter > 40*time.Millisecond || refused.Degraded {
		t.Fatalf("a refusal: %+v, want retry in (0, 40ms]", refused)
	}
}

// TestRedisSharedByTwoLimiters: two proxies on one Redis, one of them with
// a clock an hour off, stay together within the regional budget.
func TestRedisSharedByTwoLimiters(t *testing.T) {
	srv := startRedis(t)
	pol := []snapshot.QuotaPolicy{redisQuota("p", srv.addr, 40, 10, "closed", 5000)}
	skewed := func() time.Time { return time.Now().Add(time.Hour) }
	ls := []*Limiter{mustNew(t, pol, "eu", nil, Options{}), mustNew(t, pol, "eu", nil, Options{Now: skewed})}
	var got, degraded atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 4 {
		wg.Go(func() {
			for time.Since(start) < time.Second {
				d := ls[i%2].Take(context.Background(), "p", []byte("shared"))
				if d.Allowed {
					got.Add(1)
				}
				if d.Degraded {
					degraded.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	limit := 10 + int(40*elapsed.Seconds()) + 1
	if got.Load() > int64(limit) || got.Load() < 10 || degraded.Load() != 0 {
		t.Fatalf("two limiters admitted %d in %v (degraded %d), want 10..%d", got.Load(), elapsed, degraded.Load(), limit)
	}
	t.Logf("admitted %d of at most %d in %v", got.Load(), limit, elapsed)
}

func TestRedisDownFailOpen(t *testing.T) {
	srv := startRedis(t)
	clk := newFakeClock()
	var storeErrors atomic.Int64
	obs := func(_, o string) {
		if o == "store_error" {
			storeErrors.Add(1)
		}
	}
	l := mustNew(t, []snapshot.QuotaPolicy{redisQuota("p", srv.addr, 1, 3, "open", 100)}, "eu", nil,
		Options{Now: clk.Now, Observe: obs})
	if d := l.Take(context.Background(), "p", []byte("k")); !d.Allowed || d.Degraded {
		t.Fatalf("with Redis up: %+v", d)
	}
	srv.stop()
	d := takeLive(t, l, "p", "k")
	if !d.Allowed || !d.Degraded || d.Remaining != 2 {
		t.Fatalf("first take with Redis down: %+v, want allowed by the local floor, degraded", d)
	}
	// The local floor (rate 1, burst 3) still limits this proxy.
	if got := countAllowed(l, "p", "k", 10); got != 2 {
		t.Fatalf("local floor admitted %d more, want 2", got)
	}
	if storeErrors.Load() != 11 {
		t.Fatalf("%d store errors observed, want 11", storeErrors.Load())
	}
	clk.Advance(time.Second) // past the retry interval: one probe, then down again
	if d := takeLive(t, l, "p", "k"); !d.Allowed || !d.Degraded {
		t.Fatalf("probe: %+v", d)
	}
}

// takeLive is a Take under a 30 s liveness deadline: it must return by the
// store's own timeout, long before; no speed is asserted.
func takeLive(t *testing.T, l *Limiter, policy, key string) Decision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := l.Take(ctx, policy, []byte(key))
	if ctx.Err() != nil {
		t.Fatalf("take %s/%s ran into the 30 s liveness deadline", policy, key)
	}
	return d
}

func TestRedisDownFailClosed(t *testing.T) {
	for name, addr := range map[string]func(t *testing.T) string{
		"closed port": func(t *testing.T) string { return freeAddr(t) },
		"stopped":     func(t *testing.T) string { s := startRedis(t); s.stop(); return s.addr },
	} {
		t.Run(name, func(t *testing.T) {
			l := mustNew(t, []snapshot.QuotaPolicy{redisQuota("p", addr(t), 1, 3, "closed", 100)}, "eu", nil, Options{})
			for i := range 3 {
				d := takeLive(t, l, "p", "k")
				if d.Allowed || !d.Degraded || d.Limit != 3 || d.RetryAfter != time.Second {
					t.Fatalf("take %d: %+v, want refused, degraded", i, d)
				}
			}
		})
	}
}

// TestRedisTimeout: a Redis that accepts but does not answer (SIGSTOP)
// costs a call its timeout, not more; while the address is marked down no
// call goes to Redis; the proxy recovers after Redis does.
func TestRedisTimeout(t *testing.T) {
	srv := startRedis(t)
	clk := newFakeClock()
	var logs syncBuffer
	l := mustNew(t, []snapshot.QuotaPolicy{redisQuota("p", srv.addr, 1000, 1000, "closed", 200)}, "eu", nil,
		Options{Now: clk.Now, Logger: slogTo(&logs)})
	calls := &countHook{}
	l.clients[srv.addr].rdb.AddHook(calls)
	if d := l.Take(context.Background(), "p", []byte("k")); !d.Allowed || d.Degraded {
		t.Fatalf("with Redis up: %+v", d)
	}
	srv.pause()
	start := time.Now()
	d := takeLive(t, l, "p", "k")
	t.Logf("frozen Redis: answered after %s with a 200 ms timeout", time.Since(start).Round(time.Millisecond))
	if d.Allowed || !d.Degraded {
		t.Fatalf("frozen Redis: %+v, want refused and degraded after the 200ms timeout", d)
	}
	// The error kind: the call gave up on its timeout (Redis still holds the
	// connection open), it was not refused.
	if out := logs.String(); !strings.Contains(out, "redis unreachable") ||
		!strings.Contains(out, "timeout") && !strings.Contains(out, "context deadline exceeded") {
		t.Fatalf("frozen Redis: want the take to end on its timeout, log:\n%s", out)
	}
	before := calls.n.Load()
	for range 5 {
		if d := l.Take(context.Background(), "p", []byte("k")); d.Allowed || !d.Degraded {
			t.Fatalf("while marked down: %+v, want refused and degraded", d)
		}
	}
	if n := calls.n.Load() - before; n != 0 {
		t.Fatalf("%d Redis commands while the address was marked down, want 0", n)
	}
	srv.resume()
	clk.Advance(time.Second)
	if d := l.Take(context.Background(), "p", []byte("k")); !d.Allowed || d.Degraded {
		t.Fatalf("after Redis came back: %+v", d)
	}
	out := logs.String()
	if strings.Count(out, "redis unreachable") != 1 || strings.Count(out, "reachable again") != 1 {
		t.Fatalf("want one line for going down and one for coming back, got:\n%s", out)
	}
}

// countHook counts the commands a client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRedisClientReuseAndScriptFlush(t *testing.T) {
	srv := startRedis(t)
	pol := []snapshot.QuotaPolicy{redisQuota("p", srv.addr, 0.001, 5, "closed", 2000),
		redisQuota("q", srv.addr, 0.001, 5, "closed", 2000)}
	l1, err := New(pol, "eu", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	countAllowed(l1, "p", "k", 2)
	l2 := mustNew(t, pol, "eu", l1, Options{})
	if len(l2.clients) != 1 || l2.clients[srv.addr] != l1.clients[srv.addr] {
		t.Fatal("the client for an unchanged address was not reused")
	}
	l1.Close()
	l1.Close()
	if err := rawClient(t, srv.addr).ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := countAllowed(l2, "p", "k", 5); got != 3 {
		t.Fatalf("after the old Limiter closed and SCRIPT FLUSH: %d admitted, want the 3 left", got)
	}
	l2.Close()
	if d := l2.Take(context.Background(), "p", []byte("k")); !d.Degraded {
		t.Fatalf("after Close: %+v, want degraded", d)
	}
}
