package accesslog

import (
	"sync/atomic"
	"time"
)

// tokenBucket is a lock-free rate limit (GCRA): rate per second, with a
// burst of one second's worth.
type tokenBucket struct {
	interval  int64        // ns per token
	tolerance int64        // how far ahead of now tat may run: (burst-1)·interval
	tat       atomic.Int64 // theoretical arrival time of the next token, ns on the caller's clock
}

func newTokenBucket(perSecond int) *tokenBucket {
	iv := int64(time.Second) / int64(perSecond)
	return &tokenBucket{interval: iv, tolerance: iv * int64(perSecond-1)}
}

// allow takes a token at time now (ns, monotonic on the caller's clock).
func (b *tokenBucket) allow(now int64) bool {
	for {
		tat := b.tat.Load()
		next := max(tat, now)
		if next-now > b.tolerance {
			return false
		}
		if b.tat.CompareAndSwap(tat, next+b.interval) {
			return true
		}
	}
}
