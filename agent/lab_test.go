package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// client makes HTTP requests from a source address in a namespace; each
// request on a new connection.
func client(t testing.TB, nsPath, src string, timeout time.Duration) *http.Client {
	d := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		netnstest.Enter(t, nsPath, func() {
			dl := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
			c, err = dl.DialContext(ctx, network, addr)
		})
		return c, err
	}
	return &http.Client{Timeout: 2 * timeout, Transport: &http.Transport{DialContext: d, DisableKeepAlives: true, Proxy: nil}}
}

// get returns the status and body of a GET, or an error.
func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func waitFor(t testing.TB, timeout time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}
