package wire

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The Date header value both servers (l7/h1, l7/h2) send, formatted once a
// second by one goroutine (started by the first call), so a response pays
// an atomic load for it, not a Format and its allocation.
var (
	date     atomic.Pointer[string]
	dateOnce sync.Once
)

// Date is the current time as a Date header value (RFC 9110 §5.6.7,
// IMF-fixdate), at most a second old. It does not allocate.
func Date() string {
	dateOnce.Do(func() {
		setDate(time.Now())
		go func() {
			for now := range time.Tick(time.Second) {
				setDate(now)
			}
		}()
	})
	return *date.Load()
}

func setDate(now time.Time) {
	v := now.UTC().Format(http.TimeFormat)
	date.Store(&v)
}
