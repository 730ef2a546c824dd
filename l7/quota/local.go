package quota

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// epsilon absorbs float rounding in refills: a bucket holding 1-1e-9
// tokens counts as holding one, so refills summed from many small steps
// admit at the same instant as one large step.
const epsilon = 1e-9

// bucket is one key's token bucket, linked into its shard's LRU list.
type bucket struct {
	key        string
	tokens     float64
	last       int64 // ns since the Limiter's base when tokens were counted
	prev, next *bucket
}

// shard is a part of a localStore's buckets behind one mutex. The list
// runs from the most recently used (head.next) to the least (head.prev).
type shard struct {
	mu   sync.Mutex
	m    map[string]*bucket
	head bucket // sentinel
	max  int
	_    [64]byte // keep shards' mutexes on different cache lines
}

// localStore holds the buckets of one policy in this process.
type localStore struct {
	lim     atomic.Pointer[limits] // changes with a global policy's lease
	maxKeys int
	seed    maphash.Seed
	mask    uint64
	shards  []shard
}

func newLocalStore(rate float64, burst, maxKeys int) *localStore {
	n := 1
	for n < 32 && maxKeys/(n*2) >= 1024 {
		n *= 2
	}
	s := &localStore{maxKeys: maxKeys, seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n)}
	s.setLimits(rate, float64(burst))
	for i := range s.shards {
		sh := &s.shards[i]
		sh.m = make(map[string]*bucket)
		sh.head.prev, sh.head.next = &sh.head, &sh.head
		sh.max = max(1, maxKeys/n)
	}
	return s
}

// limits are a store's rate (tokens per second, > 0) and burst.
type limits struct{ rate, burst float64 }

// setLimits changes the rate and burst every bucket refills with from now
// on (a global policy's lease changed); tokens above a smaller burst are
// cut at the next take.
func (s *localStore) setLimits(rate, burst float64) {
	if l := s.lim.Load(); l == nil || l.rate != rate || l.burst != burst {
		s.lim.Store(&limits{rate: rate, burst: burst})
	}
}

// result is a bucket's answer: whether a token was taken and how many are
// left.
type result struct {
	allowed bool
	tokens  float64
}

// take takes a token from key's bucket at now (ns since base).
func (s *localStore) take(key []byte, now int64) result {
	lim := s.lim.Load()
	sh := &s.shards[maphash.Bytes(s.seed, key)&s.mask]
	sh.mu.Lock()
	b := sh.m[string(key)]
	if b == nil {
		b = sh.insert(string(key), now, lim)
	} else {
		sh.unlink(b)
		sh.pushFront(b)
		lim.refill(b, now)
	}
	r := result{allowed: b.tokens >= 1-epsilon}
	if r.allowed {
		b.tokens--
	}
	r.tokens = b.tokens
	sh.mu.Unlock()
	return r
}

func (l *limits) refill(b *bucket, now int64) {
	if now > b.last {
		b.tokens = b.tokens + float64(now-b.last)*l.rate/1e9
		b.last = now
	}
	b.tokens = math.Min(l.burst, b.tokens)
}

// full reports whether b will have refilled completely by now.
func (l *limits) full(b *bucket, now int64) bool {
	return b.tokens+float64(max(0, now-b.last))*l.rate/1e9 >= l.burst-epsilon
}

// idleDrop is how long a refilled bucket must have been idle before an
// insert drops it while its shard has room.
const idleDrop = int64(time.Minute)

// insert adds a full bucket for key. It first drops up to two buckets at
// the LRU end that have refilled and been idle for idleDrop (a full bucket
// is the same as none, so nothing is lost). A full shard then evicts one
// of its four least recently used buckets that has refilled, else the
// least recently used one.
func (sh *shard) insert(key string, now int64, s *limits) *bucket {
	var b *bucket
	for i := 0; i < 2 && len(sh.m) > 0; i++ {
		t := sh.head.prev
		if now-t.last < idleDrop || !s.full(t, now) {
			break
		}
		b = sh.remove(t)
	}
	if len(sh.m) >= sh.max {
		victim := sh.head.prev
		for t, i := victim, 0; i < 4 && t != &sh.head; t, i = t.prev, i+1 {
			if s.full(t, now) {
				victim = t
				break
			}
		}
		b = sh.remove(victim)
	}
	if b == nil {
		b = new(bucket)
	}
	*b = bucket{key: key, tokens: s.burst, last: now}
	sh.m[key] = b
	sh.pushFront(b)
	return b
}

func (sh *shard) remove(b *bucket) *bucket {
	sh.unlink(b)
	delete(sh.m, b.key)
	return b
}

func (sh *shard) unlink(b *bucket) {
	b.prev.next, b.next.prev = b.next, b.prev
}

func (sh *shard) pushFront(b *bucket) {
	b.prev, b.next = &sh.head, sh.head.next
	sh.head.next.prev = b
	sh.head.next = b
}

// len is the number of buckets held (for tests).
func (s *localStore) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
