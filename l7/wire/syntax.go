// Package wire is the HTTP/1.1 message syntax rampart's server (l7/h1) and
// upstream client (l7/upstream) share: line reading under a byte budget,
// strict field splitting, framing headers, and body readers for
// Content-Length, chunked and close-delimited bodies (RFC 9112); and the
// cached Date header value l7/h1 and l7/h2 both send.
package wire

import (
	"bufio"
	"errors"
	"fmt"
	"net/textproto"
	"strconv"
	"strings"
)

// ErrMalformed wraps every syntax or framing error in a message.
var ErrMalformed = errors.New("malformed HTTP/1.1 message")

// Malformed returns an error wrapping ErrMalformed.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// ErrLineTooLong is returned (wrapped in ErrMalformed) for a line longer
// than the reader's buffer.
var ErrLineTooLong = errors.New("line too long")

// ErrHeadTooLarge is returned (wrapped in ErrMalformed) when a head exceeds
// its byte budget.
var ErrHeadTooLarge = errors.New("head too large")

// ReadLine returns one line without its CRLF (a bare LF is accepted), valid
// until the next read, charging its length to *budget.
func ReadLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: %w: header line longer than %d bytes", ErrMalformed, ErrLineTooLong, br.Size())
		}
		return nil, err
	}
	*budget -= len(line)
	if *budget < 0 {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, ErrHeadTooLarge)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func SplitField(line []byte) (name, value []byte, err error) {
	if line[0] == ' ' || line[0] == '\t' {
		return nil, nil, Malformed("obsolete line folding")
	}
	colon := -1
	for i, c := range line {
		if c == ':' {
			colon = i
			break
		}
		if !IsTokenChar(c) {
			return nil, nil, Malformed("invalid byte %q in header name", c)
		}
	}
	if colon <= 0 {
		return nil, nil, Malformed("header line without a name and colon")
	}
	value = line[colon+1:]
	for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
		value = value[1:]
	}
	for len(value) > 0 && (value[len(value)-1] == ' ' || value[len(value)-1] == '\t') {
		value = value[:len(value)-1]
	}
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, nil, Malformed("control byte %q in the value of %s", c, line[:colon])
		}
	}
	return line[:colon], value, nil
}

func ParseContentLength(v string) (int64, error) {
	if v == "" || len(v) > 18 {
		return 0, Malformed("bad Content-Length %q", v)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, Malformed("bad Content-Length %q", v)
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, Malformed("bad Content-Length %q", v)
	}
	return n, nil
}

func IsTokenChar(c byte) bool { return tokenChars[c] }

var tokenChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

func Truncate(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// HasToken reports whether a comma-separated header value lists token
// (case-insensitively).
func HasToken(v, token string) bool {
	for len(v) > 0 {
		var part string
		part, v = cutComma(v)
		if asciiEqualFold(trimOWS(part), token) {
			return true
		}
	}
	return false
}

// TokenEqual compares two tokens as HTTP does (RFC 9110 §5.6.2, RFC 9112
// §7: "chunked" is case-insensitive): ASCII letters fold, nothing else does
// (unlike strings.EqualFold, for which the Kelvin sign equals "k").
func TokenEqual(a, b string) bool { return asciiEqualFold(a, b) }

func cutComma(v string) (string, string) {
	for i := 0; i < len(v); i++ {
		if v[i] == ',' {
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept-Ranges", "Age", "Cache-Control", "Connection", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Type", "Date", "Etag", "Expires",
		"Keep-Alive", "Last-Modified", "Location", "Server", "Set-Cookie", "Trailer",
		"Transfer-Encoding", "Vary", "Via", "X-Content-Type-Options", "X-Request-Id",
		"Grpc-Status", "Grpc-Message", "Strict-Transport-Security", "Retry-After",
		"Access-Control-Allow-Origin", "X-Frame-Options", "Upgrade", "Proxy-Connection", "Te",
	} {
		m[k] = k
		m[textproto.CanonicalMIMEHeaderKey(k)] = k
		b := []byte(k)
		for i := range b {
			if b[i] >= 'A' && b[i] <= 'Z' {
				b[i] += 'a' - 'A'
			}
		}
		m[string(b)] = k
	}
	return m
}()

var commonValues = map[string]string{
	"chunked": "chunked", "keep-alive": "keep-alive", "close": "close", "bytes": "bytes",
	"application/json": "application/json", "text/plain; charset=utf-8": "text/plain; charset=utf-8",
	"text/html; charset=utf-8": "text/html; charset=utf-8", "application/grpc": "application/grpc",
	"no-cache": "no-cache", "nosniff": "nosniff", "gzip": "gzip", "0": "0",
}

func CanonicalKey(name []byte) string {
	if k, ok := commonKeys[string(name)]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(string(name))
}

func InternValue(v []byte) string {
	if s, ok := commonValues[string(v)]; ok {
		return s
	}
	return string(v)
}
