package upstream

import (
	"errors"
	"testing"
)

// A response's "chunked" is matched case-insensitively (RFC 9112 §7), in
// ASCII only.
func TestResponseTransferEncodingTokenCase(t *testing.T) {
	for _, te := range []string{"Chunked", "CHUNKED", "chunked"} {
		body, _, done, err := readBody("GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: "+te+"\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		if err != nil || body != "hello" || !done {
			t.Errorf("Transfer-Encoding: %s: body %q done %v err %v", te, body, done, err)
		}
	}
	if _, _, err := readHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: chun\u212aed\r\n\r\n"); !errors.Is(err, ErrMalformed) {
		t.Errorf("Transfer-Encoding with a Kelvin sign: %v, want ErrMalformed", err)
	}
}
