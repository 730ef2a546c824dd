package quota

import (
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestSetHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Decision
		want http.Header
	}{
		{"allowed", Decision{Allowed: true, Limit: 10, Remaining: 7, Reset: 300 * time.Millisecond},
			http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"7"}, "Ratelimit-Reset": {"1"}}},
		{"full", Decision{Allowed: true, Limit: 10, Remaining: 10},
			http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"10"}, "Ratelimit-Reset": {"0"}}},
		{"refused", Decision{Limit: 5, RetryAfter: 1200 * time.Millisecond, Reset: 4500 * time.Millisecond},
			http.Header{"Ratelimit-Limit": {"5"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"5"}, "Retry-After": {"2"}}},
		{"refused, retry under a second", Decision{Limit: 5, RetryAfter: time.Millisecond, Reset: 2 * time.Second},
			http.Header{"Ratelimit-Limit": {"5"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"2"}, "Retry-After": {"1"}}},
		{"refused, no retry known", Decision{Limit: 5},
			http.Header{"Ratelimit-Limit": {"5"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"0"}, "Retry-After": {"1"}}},
		{"huge", Decision{Limit: 5, RetryAfter: 1<<63 - 1, Reset: 1<<63 - 1},
			http.Header{"Ratelimit-Limit": {"5"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"9223372037"}, "Retry-After": {"9223372037"}}},
		{"unknown policy", Decision{Allowed: true}, http.Header{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			tc.d.SetHeaders(h)
			if !reflect.DeepEqual(h, tc.want) {
				t.Fatalf("headers %v, want %v", h, tc.want)
			}
		})
	}
}

// SetHeaders runs on every request of a route with a quota: the value
// strings share one allocation and the value slices another.
func TestSetHeadersAllocations(t *testing.T) {
	h := http.Header{}
	d := Decision{Allowed: true, Limit: 1000000, Remaining: 999999, Reset: time.Millisecond}
	if n := testing.AllocsPerRun(100, func() { d.SetHeaders(h) }); n > 2 {
		t.Fatalf("%v allocations per SetHeaders, want at most 2", n)
	}
}
