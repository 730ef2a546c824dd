package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
)

// ErrMalformed wraps every framing or syntax error in a response from an
// upstream: such a response is never forwarded.
var ErrMalformed = errors.New("malformed upstream response")

// ResponseHead is the parsed status line and framing of a response.
type ResponseHead struct {
	Status        int
	ProtoMinor    int   // HTTP/1.x
	ContentLength int64 // -1 when absent
	Chunked       bool
	Close         bool // the upstream will close the connection after this response
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// ReadResponseHead reads a status line and header section into h (which it
// does not clear). Parsing is strict: obsolete line folding, control bytes,
// white space before the colon, conflicting Content-Length values, and
// Content-Length together with Transfer-Encoding are errors, as is a
// Transfer-Encoding other than "chunked". The head may be at most maxBytes.
// Header names are canonicalised; common names are interned.
func ReadResponseHead(br *bufio.Reader, h http.Header, maxBytes int) (ResponseHead, error) {
	rh := ResponseHead{ContentLength: -1}
	line, err := readLine(br, &maxBytes)
	if err != nil {
		return rh, err
	}
	if err := parseStatusLine(line, &rh); err != nil {
		return rh, err
	}
	var vals []string
	sawTE, sawCL := false, false
	for {
		line, err = readLine(br, &maxBytes)
		if err != nil {
			return rh, err
		}
		if len(line) == 0 {
			break
		}
		name, value, err := splitField(line)
		if err != nil {
			return rh, err
		}
		key := canonicalKey(name)
		v := internValue(value)
		switch key {
		case "Content-Length":
			n, err := parseContentLength(v)
			if err != nil {
				return rh, err
			}
			if sawCL && n != rh.ContentLength {
				return rh, malformed("conflicting Content-Length values %d and %d", rh.ContentLength, n)
			}
			sawCL, rh.ContentLength = true, n
			if len(h[key]) > 0 {
				continue
			}
		case "Transfer-Encoding":
			if sawTE || v != "chunked" {
				return rh, malformed("unsupported Transfer-Encoding %q", v)
			}
			sawTE, rh.Chunked = true, true
			continue
		case "Connection":
			if hasToken(v, "close") {
				rh.Close = true
			}
		}
		if cur, ok := h[key]; ok {
			h[key] = append(cur, v)
			continue
		}
		if len(vals) == cap(vals) {
			vals = make([]string, 0, 16)
		}
		vals = append(vals, v)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if sawTE && sawCL {
		return rh, malformed("both Content-Length and Transfer-Encoding")
	}
	if rh.ProtoMinor == 0 && !hasToken(h.Get("Connection"), "keep-alive") {
		rh.Close = true
	}
	if !rh.Chunked && rh.ContentLength < 0 && bodyAllowed(rh.Status) {
		rh.Close = true // delimited by the connection closing
	}
	return rh, nil
}

// bodyAllowed reports whether a response with this status can carry a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != 204 && status != 304
}

// readLine returns one line without its CRLF (a bare LF is accepted), valid
// until the next read, charging its length to *budget.
func readLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, malformed("header line longer than %d bytes", br.Size())
		}
		return nil, err
	}
	*budget -= len(line)
	if *budget < 0 {
		return nil, malformed("response head too large")
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

func parseStatusLine(line []byte, rh *ResponseHead) error {
	// HTTP/1.1 200 OK
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return malformed("bad status line %q", truncate(line))
	}
	switch line[7] {
	case '0':
		rh.ProtoMinor = 0
	case '1':
		rh.ProtoMinor = 1
	default:
		return malformed("bad HTTP version in %q", truncate(line))
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return malformed("bad status code in %q", truncate(line))
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return malformed("status code %d out of range", code)
	}
	for _, c := range line[12:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return malformed("control byte in reason phrase")
		}
	}
	rh.Status = code
	return nil
}

func splitField(line []byte) (name, value []byte, err error) {
	if line[0] == ' ' || line[0] == '\t' {
		return nil, nil, malformed("obsolete line folding")
	}
	colon := -1
	for i, c := range line {
		if c == ':' {
			colon = i
			break
		}
		if !isTokenChar(c) {
			return nil, nil, malformed("invalid byte %q in header name", c)
		}
	}
	if colon <= 0 {
		return nil, nil, malformed("header line without a name and colon")
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
			return nil, nil, malformed("control byte %q in the value of %s", c, line[:colon])
		}
	}
	return line[:colon], value, nil
}

func parseContentLength(v string) (int64, error) {
	if v == "" || len(v) > 18 {
		return 0, malformed("bad Content-Length %q", v)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, malformed("bad Content-Length %q", v)
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, malformed("bad Content-Length %q", v)
	}
	return n, nil
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
		c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~'
}

func truncate(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// hasToken reports whether a comma-separated header value lists token
// (case-insensitively).
func hasToken(v, token string) bool {
	for len(v) > 0 {
		var part string
		part, v = cutComma(v)
		if asciiEqualFold(trimOWS(part), token) {
			return true
		}
	}
	return false
}

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

func canonicalKey(name []byte) string {
	if k, ok := commonKeys[string(name)]; ok {
		return k
	}
	return textproto.CanonicalMIMEHeaderKey(string(name))
}

func internValue(v []byte) string {
	if s, ok := commonValues[string(v)]; ok {
		return s
	}
	return string(v)
}
