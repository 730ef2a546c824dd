package upstream

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestAnswered: Answered waits (without reading) until the upstream starts
// its answer or the wait ends: false while silent, true once bytes came,
// and the response is then read whole; on a reused connection too; and
// true on a connection the upstream closed, whose next read sees the end.
func TestAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answer := make(chan string)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					a, ok := <-answer
					if !ok || a == "close" {
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(a))+"\r\n\r\n"+a)
				}
			}()
		}
	}()
	p := NewPool(ln.Addr().String(), PoolConfig{})
	defer p.Close()
	deadline := time.Now().Add(30 * time.Second) // a liveness bound
	for i, want := range []string{"one", "two"} {
		c, err := p.Get(context.Background(), deadline, 0)
		if err != nil {
			t.Fatal(err)
		}
		if (i == 1) != c.Reused {
			t.Fatalf("request %d: reused %v", i, c.Reused)
		}
		_ = c.SetDeadline(deadline)
		io.WriteString(c.Writer(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if err := c.Writer().Flush(); err != nil {
			t.Fatal(err)
		}
		if c.Answered(time.Millisecond, deadline) {
			t.Fatalf("request %d: Answered before the upstream wrote anything", i)
		}
		answer <- want
		if !c.Answered(20*time.Second, deadline) {
			t.Fatalf("request %d: not Answered after the upstream wrote", i)
		}
		h := http.Header{}
		rh, err := ReadResponseHead(c.Reader(), h, 64<<10)
		if err != nil || rh.Status != 200 {
			t.Fatalf("request %d: %+v %v", i, rh, err)
		}
		body := c.Body("GET", rh, nil)
		b, err := io.ReadAll(body)
		if err != nil || string(b) != want {
			t.Fatalf("request %d: body %q %v", i, b, err)
		}
		c.Release(body.Done() && !rh.Close)
	}
	// An answer already in the socket when Answered is called is seen at
	// once (a version that waited for the poller before reading missed it:
	// Go's poller forgets a readiness that came before the wait began).
	c, err := p.Get(context.Background(), deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c.Writer(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.Writer().Flush()
	answer <- "fast"
	for { // until the answer's first byte is in the socket (peeked, not read)
		if err := c.probe.raw.Control(c.probe.fn); err != nil {
			t.Fatal(err)
		}
		if c.probe.errno == nil && c.probe.n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream's answer never arrived")
		}
		runtime.Gosched()
	}
	if !c.Answered(10*time.Second, deadline) || c.Reader().Buffered() == 0 {
		t.Fatal("an answer already in the socket was not seen by Answered")
	}
	rh, err := ReadResponseHead(c.Reader(), http.Header{}, 64<<10)
	if err != nil || rh.Status != 200 {
		t.Fatalf("fast answer: %+v %v", rh, err)
	}
	body := c.Body("GET", rh, nil)
	if b, _ := io.ReadAll(body); string(b) != "fast" {
		t.Fatalf("fast answer body %q", b)
	}
	c.Release(body.Done() && !rh.Close)

	c, err = p.Get(context.Background(), deadline, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c.Writer(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.Writer().Flush()
	answer <- "close"
	if !c.Answered(20*time.Second, deadline) {
		t.Fatal("a connection the upstream closed is not Answered")
	}
	if _, err := ReadResponseHead(c.Reader(), http.Header{}, 64<<10); err == nil {
		t.Fatal("reading a closed connection gave a response")
	}
	c.Close()
}
