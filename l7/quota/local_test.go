package quota

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestLocalBurstThenRefill(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", 10, 5)}, "", nil, Options{Now: clk.Now})
	for i := range 5 {
		d := l.Take(context.Background(), "p", []byte("k"))
		if !d.Allowed || d.Limit != 5 || d.Remaining != 4-i || d.Degraded {
			t.Fatalf("take %d: %+v", i, d)
		}
	}
	d := l.Take(context.Background(), "p", []byte("k"))
	if d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Reset != 500*time.Millisecond {
		t.Fatalf("6th take: %+v, want refused, retry 100ms, reset 500ms", d)
	}
	clk.Advance(300 * time.Millisecond)
	if got := countAllowed(l, "p", "k", 10); got != 3 {
		t.Fatalf("after 300ms: %d admitted, want 3", got)
	}
	if got := countAllowed(l, "p", "other", 10); got != 5 {
		t.Fatalf("another key: %d admitted, want its own burst 5", got)
	}
}

// TestLocalExactCounts: over 10 s of simulated time in 1 ms steps, taking
// until refused at each step admits exactly burst + rate × 10.
func TestLocalExactCounts(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{1, 1}, {10, 5}, {250, 20}, {0.5, 3}, {3, 2}, {1000, 1}} {
		t.Run(fmt.Sprintf("rate%v_burst%d", tc.rate, tc.burst), func(t *testing.T) {
			clk := newFakeClock()
			l := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", tc.rate, tc.burst)}, "", nil, Options{Now: clk.Now})
			got := 0
			for step := 0; step <= 10_000; step++ {
				for l.Take(context.Background(), "p", []byte("k")).Allowed {
					got++
				}
				if step < 10_000 {
					clk.Advance(time.Millisecond)
				}
			}
			if want := tc.burst + int(tc.rate*10); got != want {
				t.Fatalf("admitted %d over 10 s, want %d", got, want)
			}
		})
	}
}

func TestRegionalShare(t *testing.T) {
	clk := newFakeClock()
	q := snapshot.QuotaPolicy{ID: "g", Key: []string{"tenant"}, Burst: 1, Store: "local",
		Regional: &snapshot.Regional{GlobalRatePerSecond: 100, Shares: map[string]float64{"eu": 0.25, "us": 0.75}}}
	l := mustNew(t, []snapshot.QuotaPolicy{q}, "eu", nil, Options{Now: clk.Now})
	if d := l.Take(context.Background(), "g", []byte("k")); !d.Allowed || d.Reset != 40*time.Millisecond {
		t.Fatalf("first take: %+v, want allowed with reset 40ms (25/s)", d)
	}
	got := 0
	for range 10_000 {
		clk.Advance(time.Millisecond)
		got += countAllowed(l, "g", "k", 2)
	}
	if got != 250 {
		t.Fatalf("10 s at 25/s admitted %d, want 250", got)
	}
}

func TestRegionWithoutShare(t *testing.T) {
	for _, region := range []string{"ap", "", "zero"} {
		t.Run(region, func(t *testing.T) {
			var logs strings.Builder
			q := snapshot.QuotaPolicy{ID: "g", Key: []string{"tenant"}, Burst: 10, Store: "local",
				Regional: &snapshot.Regional{GlobalRatePerSecond: 100, Shares: map[string]float64{"eu": 1, "zero": 0}}}
			l := mustNew(t, []snapshot.QuotaPolicy{q}, region, nil, Options{Logger: slogTo(&logs)})
			if !strings.Contains(logs.String(), "no share") || !strings.Contains(logs.String(), "region="+region) {
				t.Fatalf("no warning naming the region: %q", logs.String())
			}
			d := l.Take(context.Background(), "g", []byte("k"))
			if d.Allowed || d.Limit != 0 || d.RetryAfter != time.Minute {
				t.Fatalf("take without budget: %+v, want refused, limit 0, retry 1m", d)
			}
		})
	}
}

func TestStateSurvivesNew(t *testing.T) {
	clk := newFakeClock()
	opts := Options{Now: clk.Now}
	pol := []snapshot.QuotaPolicy{localPolicy("p", 1, 3), localPolicy("q", 1, 3)}
	l1 := mustNew(t, pol, "", nil, opts)
	countAllowed(l1, "p", "k", 3)
	countAllowed(l1, "q", "k", 3)
	clk.Advance(time.Second)
	l2 := mustNew(t, pol, "", l1, opts)
	if got := countAllowed(l2, "p", "k", 5); got != 1 {
		t.Fatalf("same policy after New: %d admitted, want the 1 refilled token", got)
	}
	changed := []snapshot.QuotaPolicy{localPolicy("p", 2, 3), pol[1]}
	changed[1].Key = []string{"client_ip"}
	l3 := mustNew(t, changed, "", l2, opts)
	if got := countAllowed(l3, "p", "k", 5); got != 3 {
		t.Fatalf("changed rate: %d admitted, want a full burst of 3", got)
	}
	if got := countAllowed(l3, "q", "k", 5); got != 3 {
		t.Fatalf("changed key: %d admitted, want a full burst of 3", got)
	}
	if got := countAllowed(l1, "p", "k", 5); got != 0 {
		t.Fatalf("old Limiter shares the unchanged state: %d admitted, want 0", got)
	}
}

func TestEviction(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", 1, 2)}, "", nil, Options{Now: clk.Now, MaxKeys: 4})
	for i := range 10 {
		countAllowed(l, "p", fmt.Sprint("k", i), 2)
	}
	if n := l.policies["p"].local.len(); n != 4 {
		t.Fatalf("%d buckets held, want MaxKeys 4", n)
	}
	if got := countAllowed(l, "p", "k9", 1); got != 0 {
		t.Fatal("a recently used bucket was evicted")
	}
	if got := countAllowed(l, "p", "k0", 2); got != 2 {
		t.Fatal("an evicted key did not start full")
	}
	clk.Advance(time.Minute) // everything refills; new keys drop full buckets first
	countAllowed(l, "p", "new", 1)
	if n := l.policies["p"].local.len(); n > 3 {
		t.Fatalf("%d buckets held after refill, want full ones dropped", n)
	}

	big := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", 1, 2)}, "", nil, Options{Now: clk.Now})
	var key []byte
	for i := range DefaultMaxKeys + 20_000 {
		key = fmt.Appendf(key[:0], "k%d", i)
		big.Take(context.Background(), "p", key)
	}
	if n := big.policies["p"].local.len(); n > DefaultMaxKeys {
		t.Fatalf("%d buckets held, want at most %d", n, DefaultMaxKeys)
	}
}

func TestConcurrentLocalExact(t *testing.T) {
	l := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", 0.001, 100)}, "", nil, Options{})
	var mu sync.Mutex
	got := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n := countAllowed(l, "p", "k", 50)
			mu.Lock()
			got += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if got != 100 {
		t.Fatalf("%d admitted by 8 goroutines, want burst 100", got)
	}
}

func TestTakeLocalNoAllocs(t *testing.T) {
	l := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", 1e6, 10)}, "", nil, Options{Observe: func(string, string) {}})
	key := []byte("tenant-1")
	l.Take(context.Background(), "p", key)
	if n := testing.AllocsPerRun(1000, func() { l.Take(context.Background(), "p", key) }); n != 0 {
		t.Fatalf("Take allocates %v times per call", n)
	}
}

func TestObserveAndUnknownPolicy(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	obs := func(p, o string) { mu.Lock(); seen[p+"/"+o]++; mu.Unlock() }
	l := mustNew(t, []snapshot.QuotaPolicy{localPolicy("p", 0.001, 2)}, "", nil, Options{Observe: obs})
	countAllowed(l, "p", "k", 3)
	if d := l.Take(context.Background(), "nope", []byte("k")); !d.Allowed || d.Limit != 0 {
		t.Fatalf("unknown policy: %+v, want allowed with limit 0", d)
	}
	if want := map[string]int{"p/allowed": 2, "p/limited": 1}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("observed %v, want %v", seen, want)
	}
	var nilL *Limiter
	if !nilL.Take(context.Background(), "p", nil).Allowed || nilL.Close() != nil {
		t.Fatal("a nil Limiter must admit and close")
	}
}

func TestNewErrors(t *testing.T) {
	good := localPolicy("p", 1, 1)
	for name, mut := range map[string]func(q *snapshot.QuotaPolicy){
		"bad key part": func(q *snapshot.QuotaPolicy) { q.Key = []string{"cookie:x"} },
		"no key":       func(q *snapshot.QuotaPolicy) { q.Key = nil },
		"burst 0":      func(q *snapshot.QuotaPolicy) { q.Burst = 0 },
		"rate 0":       func(q *snapshot.QuotaPolicy) { q.RatePerSecond = 0 },
		"rate inf":     func(q *snapshot.QuotaPolicy) { q.RatePerSecond = math.Inf(1) },
		"bad store":    func(q *snapshot.QuotaPolicy) { q.Store = "memcached" },
		"redis block":  func(q *snapshot.QuotaPolicy) { q.Store = "redis" },
		"fail mode": func(q *snapshot.QuotaPolicy) {
			*q = redisQuota("p", "127.0.0.1:1", 1, 1, "maybe", 50)
		},
		"bad global": func(q *snapshot.QuotaPolicy) {
			q.Regional = &snapshot.Regional{Shares: map[string]float64{"eu": 1}}
		},
	} {
		q := good
		mut(&q)
		if _, err := New([]snapshot.QuotaPolicy{q}, "eu", nil, Options{}); err == nil || !strings.Contains(err.Error(), `"p"`) {
			t.Errorf("%s: err = %v, want one naming the policy", name, err)
		}
	}
	if _, err := New([]snapshot.QuotaPolicy{good, good}, "", nil, Options{}); err == nil {
		t.Error("a policy defined twice was accepted")
	}
}
