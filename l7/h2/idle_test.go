package h2

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/rampart-edge/rampart/l7/tlstest"
)

// TestTLSIdleWaitsWithoutBuffer: over TLS, a connection with no open
// stream waits for its next frame with the read buffer pooled, and
// requests after such a wait (with and without a body) come through whole.
func TestTLSIdleWaitsWithoutBuffer(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, r.URL.Path+" "+string(b))
	})}
	srv := tlstest.Serve(t, func(c *tls.Conn) { s.ServeConn(c) }, "h2")
	before := idleWaits.Load()
	tr := &http2.Transport{TLSClientConfig: srv.ClientConfig()}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second} // a liveness bound
	for _, p := range []string{"/a", "/b", "/c"} {
		resp, err := c.Get("https://" + srv.Addr + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != p+" " {
			t.Fatalf("GET %s: %q", p, b)
		}
	}
	big := strings.Repeat("z", 100<<10) // DATA frames over several TLS records while the stream is open
	resp, err := c.Post("https://"+srv.Addr+"/post", "text/plain", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "/post "+big {
		t.Fatalf("POST: %d bytes back, want %d", len(b), len(big)+6)
	}
	if n := idleWaits.Load() - before; n < 3 {
		t.Fatalf("%d waits without a buffer for 4 requests on one connection, want at least 3", n)
	}
}
