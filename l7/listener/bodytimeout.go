package listener

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// errBodyTimeout ends the read of an HTTP/2 or HTTP/3 request body whose
// next bytes did not arrive within the listener's request_body_timeout_ms.
// It matches os.ErrDeadlineExceeded, as HTTP/1.1's body read timeout does.
var errBodyTimeout = fmt.Errorf("request body: no bytes within request_body_timeout_ms: %w", os.ErrDeadlineExceeded)

// IsBodyTimeout reports whether reading a client's request body failed
// because the body stalled (any protocol).
func IsBodyTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// bodyTimeout gives every read of an HTTP/2 or HTTP/3 request body a
// deadline. Both servers only offer an absolute stream read deadline
// (http.ResponseController), which x/net/http2 sets through a message to
// the connection's serve goroutine on every call; so one timer per request,
// re-armed around each read, closes the body when a read waits too long:
// that wakes the read and resets the stream (after the handler returns on
// h2, at once with STOP_SENDING on h3), freeing everything the request
// holds.
type bodyTimeout struct {
	next    http.Handler
	timeout time.Duration
	counter prometheus.Counter
}

func withBodyTimeout(next http.Handler, timeout time.Duration, counter prometheus.Counter) http.Handler {
	if timeout <= 0 {
		return next
	}
	return &bodyTimeout{next: next, timeout: timeout, counter: counter}
}

func (h *bodyTimeout) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 { // h2 ends a bodiless stream with its head
		h.next.ServeHTTP(w, r)
		return
	}
	b := &timedBody{body: r.Body, timeout: h.timeout, counter: h.counter}
	r.Body = b
	defer b.stop()
	h.next.ServeHTTP(w, r)
}

// timedBody is a request body whose every read must return within timeout.
type timedBody struct {
	body    io.ReadCloser
	timeout time.Duration
	counter prometheus.Counter
	timer   *time.Timer
	fired   atomic.Bool
	closed  atomic.Bool // the underlying body is closed at most once
}

func (b *timedBody) Read(p []byte) (int, error) {
	if b.fired.Load() {
		return 0, errBodyTimeout
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(b.timeout, b.expire)
	} else {
		b.timer.Reset(b.timeout)
	}
	n, err := b.body.Read(p)
	if !b.timer.Stop() && b.fired.Load() {
		return n, errBodyTimeout
	}
	return n, err
}

// expire runs on the timer's goroutine while a read waits.
func (b *timedBody) expire() {
	b.fired.Store(true)
	b.counter.Inc()
	_ = b.Close()
}

func (b *timedBody) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.body.Close()
}

// stop disarms the timer once the handler has returned.
func (b *timedBody) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}
