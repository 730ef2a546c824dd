package h2

import (
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestIdleConnectionMemory logs the heap an idle connection holds after
// one request, on both servers (a FIGURE, not a bound):
//
//	go test -count=1 -run TestIdleConnectionMemory -v ./l7/h2 | grep FIGURE
func TestIdleConnectionMemory(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	for _, name := range []string{"rampart", "std"} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			rs := &Server{Handler: handler, workerIdle: 20 * time.Millisecond}
			ss := &http2.Server{}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					if name == "rampart" {
						go rs.ServeConn(c)
					} else {
						go ss.ServeConn(c, &http2.ServeConnOpts{Handler: handler})
					}
				}
			}()
			const n = 300
			heap := func() uint64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m.HeapInuse + m.StackInuse
			}
			var clients []*rawClient
			ts := &testServer{addr: ln.Addr().String()}
			before := heap()
			for i := range n {
				rc := ts.raw(t)
				rc.handshake()
				rc.get(1, true)
				rc.response(1)
				clients = append(clients, rc)
				_ = i
			}
			if name == "rampart" { // idle workers leave after workerIdle
				deadline := time.Now().Add(liveness)
				for workers(rs) > 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%d workers still there", workers(rs))
					}
					time.Sleep(10 * time.Millisecond)
				}
			} else {
				time.Sleep(100 * time.Millisecond) // x/net's handler goroutines end with their streams
			}
			after := heap()
			per := (int64(after) - int64(before)) / n
			t.Logf("FIGURE h2 idle connection memory (%s server, client side included): %d bytes/connection over %d connections", name, per, n)
			if per <= 0 {
				t.Fatalf("no memory measured (%d -> %d)", before, after)
			}
			for _, rc := range clients {
				_ = rc.nc.Close()
			}
		})
	}
}

func workers(s *Server) int { return sumConns(s, func(c *conn) int { return c.workers }) }

// sumConns adds up f over s's connections, each read under its lock.
func sumConns(s *Server, f func(*conn) int) int {
	n := 0
	s.conns.Each(func(c *conn) {
		c.mu.Lock()
		n += f(c)
		c.mu.Unlock()
	})
	return n
}
