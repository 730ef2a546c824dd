package route

import (
	"errors"
	"fmt"
)

// ErrBadQuery wraps every error of CheckQuery.
var ErrBadQuery = errors.New("bad query")

// CheckQuery checks a raw query (without its "?") against RFC 3986 §3.4:
// query = *( pchar / "/" / "?" ). Every other byte is an error: space,
// controls, bytes ≥ 0x80, "#", and the characters a URI never holds
// unescaped (`"<>[\]^{|}` and the backtick). A "%" must start an escape
// of two hex digits, as in a path; escapes are not decoded, so "%00" is
// allowed. The query is forwarded as sent, so whatever passes here cannot
// end the request line or split it.
func CheckQuery(q string) error {
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c == '%' {
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return fmt.Errorf("%w: %q at offset %d does not start a %%XX escape", ErrBadQuery, c, i)
			}
			i += 2
			continue
		}
		if !queryChars[c] {
			return fmt.Errorf("%w: byte %q at offset %d", ErrBadQuery, c, i)
		}
	}
	return nil
}

// queryChars: unreserved, sub-delims, ":", "@", "/" and "?".
var queryChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	for _, c := range []byte("-._~!$&'()*+,;=:@/?") {
		t[c] = true
	}
	return t
}()
