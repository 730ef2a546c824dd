package h2

import "time"

// bucket is a token bucket: rate tokens a second, burst rate.
type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

func newBucket(rate int) bucket { return bucket{rate: float64(rate), tokens: float64(rate)} }

// take spends one token and reports whether one was there.
func (b *bucket) take(now time.Time) bool {
	if !b.last.IsZero() {
		b.tokens = min(b.rate, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
