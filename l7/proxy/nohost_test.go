package proxy

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// TestHTTP10WithoutHost: HTTP/1.0 allows a request without Host, HTTP/1.1
// does not. The proxy forwards such a request with the endpoint's address
// as Host, and no X-Forwarded-Host, so a strict upstream (Go's server here,
// nginx in perf/tls.sh) answers it and keeps the connection: ten requests
// use one upstream connection.
func TestHTTP10WithoutHost(t *testing.T) {
	var conns atomic.Int32
	up := startUpstreamWith(t, "app", nil, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
	})
	l := newLab(t)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("r", "/r", "app")}
	l.apply(c)
	for i := 0; i < 10; i++ {
		nc, err := net.Dial("tcp", l.addr("http"))
		if err != nil {
			t.Fatal(err)
		}
		if code := rawH1(t, nc, "GET /r HTTP/1.0\r\n\r\n"); code != 200 {
			t.Fatalf("request %d without Host: %d, want 200", i, code)
		}
	}
	last := up.Last()
	if last.Host != up.Addr() || last.Header.Get("X-Forwarded-Host") != "" {
		t.Fatalf("upstream saw Host %q, X-Forwarded-Host %q; want the endpoint %q and none", last.Host, last.Header.Get("X-Forwarded-Host"), up.Addr())
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections for 10 requests, want 1", n)
	}
}
