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
//
// The fields share one string and one value slice (2 allocations instead
// of 7 with Header.Set; it runs on every request of a route with a quota).
func (d Decision) SetHeaders(h http.Header) {
	if d.Allowed && d.Limit == 0 {
		return
	}
	var buf [80]byte
	b := strconv.AppendInt(buf[:0], int64(d.Limit), 10)
	n1 := len(b)
	b = strconv.AppendInt(b, int64(max(0, d.Remaining)), 10)
	n2 := len(b)
	b = strconv.AppendInt(b, ceilSeconds(d.Reset), 10)
	n3 := len(b)
	if !d.Allowed {
		b = strconv.AppendInt(b, max(1, ceilSeconds(d.RetryAfter)), 10)
	}
	all := string(b)
	vals := make([]string, 4)
	vals[0], vals[1], vals[2], vals[3] = all[:n1], all[n1:n2], all[n2:n3], all[n3:]
	// canonical keys (what Header.Set would make of RateLimit-Limit...)
	h["Ratelimit-Limit"] = vals[0:1:1]
	h["Ratelimit-Remaining"] = vals[1:2:2]
	h["Ratelimit-Reset"] = vals[2:3:3]
	if !d.Allowed {
		h["Retry-After"] = vals[3:4:4]
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
