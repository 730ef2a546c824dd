package tlstest

import (
	"bufio"
	"crypto/tls"
	"io"
	"testing"
	"time"
)

// A connection is handed on after its handshake, with the protocol
// negotiated; a client that trusts other roots is refused.
func TestServe(t *testing.T) {
	s := Serve(t, func(c *tls.Conn) {
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, c.ConnectionState().NegotiatedProtocol+" "+line)
	}, "h2", "http/1.1")
	cfg := s.ClientConfig()
	cfg.NextProtos = []string{"http/1.1"}
	c, err := tls.Dial("tcp", s.Addr, cfg)
	if err != nil {
		t.Fatalf("dial with the server's roots: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a liveness bound
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	if string(got) != "http/1.1 ping\n" {
		t.Fatalf("got %q, want %q", got, "http/1.1 ping\n")
	}

	other := Serve(t, func(c *tls.Conn) { c.Close() })
	if c, err := tls.Dial("tcp", s.Addr, other.ClientConfig()); err == nil {
		c.Close()
		t.Fatal("a client trusting another test certificate completed the handshake")
	}
}
