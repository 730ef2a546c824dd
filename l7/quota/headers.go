package quota

import (
	"net/http"
	"strconv"
	"time"
)

// SetHeaders writes d as the fields of the IETF RateLimit header draft:
// RateLimit-Limit (the burst), RateLimit-Remaining and RateLimit-Reset
// (delta seconds until the bucket is full, rounded up), and, when the
// request was refused, Retry-After (whole seconds, at least 1). A decision
// without a limit (an unknown policy) sets nothing.
func (d Decision) SetHeaders(h http.Header) {
	if d.Allowed && d.Limit == 0 {
		return
	}
	h.Set("RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(max(0, d.Remaining)))
	h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.Reset), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(1, ceilSeconds(d.RetryAfter)), 10))
	}
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
