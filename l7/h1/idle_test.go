package h1

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/tlstest"
)

// TestTLSIdleWaitsWithoutBuffers: on TLS, a keep-alive connection waits
// for its next request with its buffers pooled (one wait per request
// here), and requests after a wait, pipelined ones and a large head all
// come through whole.
func TestTLSIdleWaitsWithoutBuffers(t *testing.T) {
	s := &Server{MaxHeaderBytes: 32 << 10, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, r.URL.Path+" "+r.Header.Get("X-Big")[:min(3, len(r.Header.Get("X-Big")))])
		})}
	srv := tlstest.Serve(t, func(c *tls.Conn) { s.ServeConn(c) })
	// Counted from before the dial: every wait of this connection is in.
	before := idleWaits.Load()
	c, err := tls.Dial("tcp", srv.Addr, srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	br := bufio.NewReader(c)
	read := func(want string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Fatalf("got %q, want %q", b, want)
		}
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: x\r\n\r\n")
		read(p + " ")
	}
	if n := idleWaits.Load() - before; n < 3 {
		t.Fatalf("%d waits without buffers for 3 requests on one connection, want at least 3", n)
	}
	// Two requests in one write: the second is already buffered, no wait.
	io.WriteString(c, "GET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\n")
	read("/p1 ")
	read("/p2 ")
	// A head larger than one TLS record (16 KiB) after a wait: three 8 KiB fields.
	big := strings.Repeat("y", 8<<10)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\nX-B2: "+big+"\r\nX-B3: "+big+"\r\n\r\n")
	read("/big yyy")
}
