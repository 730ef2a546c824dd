package upstream

import (
	"bufio"
	"net/http"

	"github.com/rampart-edge/rampart/l7/wire"
)

// ErrMalformed wraps every framing or syntax error in a response from an
// upstream: such a response is never forwarded.
var ErrMalformed = wire.ErrMalformed

// ResponseHead is the parsed status line and framing of a response.
type ResponseHead struct {
	Status        int
	ProtoMinor    int   // HTTP/1.x
	ContentLength int64 // -1 when absent
	Chunked       bool
	Close         bool // the upstream will close the connection after this response
}

// Framing says how the body of this response to a request with the given
// method is delimited.
func (rh ResponseHead) Framing(method string) wire.Framing {
	switch {
	case method == "HEAD" || !bodyAllowed(rh.Status):
		return wire.NoBody
	case rh.Chunked:
		return wire.Chunked
	case rh.ContentLength >= 0:
		return wire.Length
	}
	return wire.UntilEOF
}

// ReadResponseHead reads a status line and header section into h (which it
// does not clear). Parsing is strict: obsolete line folding, control bytes,
// white space before the colon, conflicting Content-Length values, and
// Content-Length together with Transfer-Encoding are errors, as is a
// Transfer-Encoding other than "chunked" (in any ASCII case). The head
// may be at most maxBytes. Header names are canonicalised; common names
// are interned.
func ReadResponseHead(br *bufio.Reader, h http.Header, maxBytes int) (ResponseHead, error) {
	rh := ResponseHead{ContentLength: -1}
	line, err := wire.ReadLine(br, &maxBytes)
	if err != nil {
		return rh, err
	}
	if err := parseStatusLine(line, &rh); err != nil {
		return rh, err
	}
	var vals []string
	sawTE, sawCL := false, false
	for {
		line, err = wire.ReadLine(br, &maxBytes)
		if err != nil {
			return rh, err
		}
		if len(line) == 0 {
			break
		}
		name, value, err := wire.SplitField(line)
		if err != nil {
			return rh, err
		}
		key := wire.CanonicalKey(name)
		v := wire.InternValue(value)
		switch key {
		case "Content-Length":
			n, err := wire.ParseContentLength(v)
			if err != nil {
				return rh, err
			}
			if sawCL && n != rh.ContentLength {
				return rh, wire.Malformed("conflicting Content-Length values %d and %d", rh.ContentLength, n)
			}
			sawCL, rh.ContentLength = true, n
			if len(h[key]) > 0 {
				continue
			}
		case "Transfer-Encoding":
			if sawTE || !wire.TokenEqual(v, "chunked") {
				return rh, wire.Malformed("unsupported Transfer-Encoding %q", v)
			}
			sawTE, rh.Chunked = true, true
			continue
		case "Connection":
			if wire.HasToken(v, "close") {
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
		return rh, wire.Malformed("both Content-Length and Transfer-Encoding")
	}
	if rh.ProtoMinor == 0 && !wire.HasToken(h.Get("Connection"), "keep-alive") {
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

func parseStatusLine(line []byte, rh *ResponseHead) error {
	// HTTP/1.1 200 OK
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return wire.Malformed("bad status line %q", wire.Truncate(line))
	}
	switch line[7] {
	case '0':
		rh.ProtoMinor = 0
	case '1':
		rh.ProtoMinor = 1
	default:
		return wire.Malformed("bad HTTP version in %q", wire.Truncate(line))
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return wire.Malformed("bad status code in %q", wire.Truncate(line))
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return wire.Malformed("status code %d out of range", code)
	}
	for _, c := range line[12:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return wire.Malformed("control byte in reason phrase")
		}
	}
	rh.Status = code
	return nil
}
