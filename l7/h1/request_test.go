package h1

import (
	"strings"
	"testing"
)

// Transfer-Encoding's "chunked" is a case-insensitive token (RFC 9112 §7)
// compared in ASCII only: the Kelvin sign (U+212A) is not a "k".
func TestTransferEncodingTokenCase(t *testing.T) {
	_, addr := echoServer(t)
	for _, te := range []string{"Chunked", "CHUNKED", "chunked"} {
		out := exchange(t, addr, "POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "+te+"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		if !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.Contains(out, "X-Te: chunked") || !strings.HasSuffix(out, "5\r\nhello\r\n0\r\n\r\n") {
			t.Errorf("Transfer-Encoding: %s: got %q", te, out)
		}
	}
	out := exchange(t, addr, "POST /te HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chun\u212aed\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 501") {
		t.Errorf("Transfer-Encoding with a Kelvin sign: got %q, want 501", out)
	}
	out = exchange(t, addr, "POST /te HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nhi")
	if !strings.HasPrefix(out, "HTTP/1.1 100") || !strings.HasSuffix(out, "2\r\nhi\r\n0\r\n\r\n") {
		t.Errorf("Expect: 100-Continue: got %q", out)
	}
}

func TestUserinfoInTargetIsRefused(t *testing.T) {
	_, addr := echoServer(t)
	for _, target := range []string{"http://u@a.example/x", "http://u:p@a.example/x", "http://:@a.example/x"} {
		out := exchange(t, addr, "GET "+target+" HTTP/1.1\r\nHost: a.example\r\n\r\n")
		if !strings.HasPrefix(out, "HTTP/1.1 400") {
			t.Errorf("GET %s: got %q, want 400", target, out)
		}
	}
	out := exchange(t, addr, "GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\n\r\n")
	if !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Errorf("absolute-form without userinfo: got %q, want 200", out)
	}
}
