package h1

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// dialRaw opens a connection with a generous deadline for the whole test.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// A body that stops arriving fails the handler's read with a deadline
// error; the handler's answer goes out and the connection closes.
func TestStalledBodyFailsTheRead(t *testing.T) {
	var timedOut atomic.Int32
	readErr := make(chan error, 1)
	s := &Server{MaxHeaderBytes: 4096, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second,
		BodyReadTimeout: 200 * time.Millisecond, BodyTimedOut: func() { timedOut.Add(1) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.ReadAll(r.Body)
			readErr <- err
			w.WriteHeader(http.StatusRequestTimeout)
		})}
	c := dialRaw(t, start(t, s))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("got %d close=%v, want 408 and Connection: close", resp.StatusCode, resp.Close)
	}
	if err := <-readErr; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("handler's body read: %v, want a deadline error", err)
	}
	if n := timedOut.Load(); n != 1 {
		t.Fatalf("BodyTimedOut called %d times, want 1", n)
	}
}

// A handler that answers without reading the body (401, 404...) gets its
// response sent before the server waits for the body; a body that never
// comes then closes the connection instead of holding it.
func TestUnreadBodyIsAnsweredFirst(t *testing.T) {
	var timedOut atomic.Int32
	s := &Server{MaxHeaderBytes: 4096, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second,
		BodyReadTimeout: 300 * time.Millisecond, BodyTimedOut: func() { timedOut.Add(1) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusUnauthorized)
		})}
	c := dialRaw(t, start(t, s))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the response waited for a body that never came: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("got %d (%v), want 401", resp.StatusCode, err)
	}
	// The client still sends nothing: the server gives up and closes.
	if n, err := br.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection still open after the drain budget: read %d, %v", n, err)
	}
	if n := timedOut.Load(); n != 1 {
		t.Fatalf("BodyTimedOut called %d times, want 1", n)
	}
}

// A small unread body that does arrive is drained after the response and
// the connection serves the next request.
func TestUnreadSmallBodyKeepsTheConnection(t *testing.T) {
	s := &Server{MaxHeaderBytes: 4096, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second,
		BodyReadTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, r.URL.Path)
		})}
	c := dialRaw(t, start(t, s))
	body := strings.Repeat("x", 4000)
	req := "POST /one HTTP/1.1\r\nHost: a\r\nContent-Length: 4000\r\n\r\n" + body +
		"GET /two HTTP/1.1\r\nHost: a\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for _, want := range []string{"/one", "/two"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		got, _ := io.ReadAll(resp.Body)
		if string(got) != want || resp.Close {
			t.Fatalf("got %q close=%v, want %q on a kept connection", got, resp.Close, want)
		}
	}
}
