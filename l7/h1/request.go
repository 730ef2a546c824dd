package h1

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/rampart-edge/rampart/l7/wire"
)

var methods = map[string]string{}

func init() {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"} {
		methods[m] = m
	}
}

// parseRequestLine parses "METHOD SP request-target SP HTTP/1.x".
func parseRequestLine(line []byte, r *http.Request, u *url.URL) *parseError {
	sp1 := indexByte(line, ' ')
	if sp1 <= 0 {
		return refuse(http.StatusBadRequest, "malformed request line")
	}
	rest := line[sp1+1:]
	sp2 := indexByte(rest, ' ')
	if sp2 <= 0 {
		return refuse(http.StatusBadRequest, "malformed request line")
	}
	method, target, version := line[:sp1], rest[:sp2], rest[sp2+1:]
	for _, ch := range method {
		if !wire.IsTokenChar(ch) {
			return refuse(http.StatusBadRequest, "invalid method")
		}
	}
	for _, ch := range target {
		if ch <= ' ' || ch >= 0x7f {
			return refuse(http.StatusBadRequest, "invalid byte in request target")
		}
	}
	switch string(version) {
	case "HTTP/1.1":
		r.Proto, r.ProtoMajor, r.ProtoMinor = proto11, 1, 1
	case "HTTP/1.0":
		r.Proto, r.ProtoMajor, r.ProtoMinor = proto10, 1, 0
	default:
		if len(version) == 8 && string(version[:5]) == "HTTP/" && version[6] == '.' {
			return refuse(http.StatusHTTPVersionNotSupported, "HTTP version not supported")
		}
		return refuse(http.StatusBadRequest, "malformed request line")
	}
	if m, ok := methods[string(method)]; ok {
		r.Method = m
	} else {
		r.Method = string(method)
	}
	r.RequestURI = string(target)
	return parseTarget(r, u)
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// parseTarget fills r.URL from the request target without allocating for
// the common origin-form path that needs no unescaping.
func parseTarget(r *http.Request, u *url.URL) *parseError {
	t := r.RequestURI
	switch {
	case t[0] == '/':
		path := t
		if i := strings.IndexByte(t, '?'); i >= 0 {
			path, u.RawQuery = t[:i], t[i+1:]
		}
		if strings.IndexByte(path, '%') < 0 {
			u.Path = path
			return nil
		}
		p, err := url.PathUnescape(path)
		if err != nil {
			return refuse(http.StatusBadRequest, "malformed percent-encoding in path")
		}
		u.Path, u.RawPath = p, path
		return nil
	case t == "*":
		if r.Method != "OPTIONS" {
			return refuse(http.StatusBadRequest, "asterisk-form target is only for OPTIONS")
		}
		u.Path = "*"
		return nil
	case r.Method == "CONNECT":
		u.Host = t
		return nil
	}
	pu, err := url.ParseRequestURI(t)
	if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
		return refuse(http.StatusBadRequest, "malformed request target")
	}
	*u = *pu
	return nil
}

// framing collects the fields that decide how a request is framed.
type framing struct {
	hosts     int
	host      string
	hasCL     bool
	cl        int64
	te        string
	teCount   int
	conn      []string
	expect    string
	hasExpect bool
}

// field parses one header line into h, noting framing fields. Single
// values are sliced out of *vals, a backing array reused across requests.
func (f *framing) field(line []byte, h http.Header, vals *[]string) *parseError {
	name, value, err := wire.SplitField(line)
	if err != nil {
		return refuse(http.StatusBadRequest, strings.TrimPrefix(err.Error(), wire.ErrMalformed.Error()+": "))
	}
	key := wire.CanonicalKey(name)
	v := wire.InternValue(value)
	switch key {
	case "Host":
		f.hosts++
		f.host = v
	case "Content-Length":
		n, err := wire.ParseContentLength(v)
		if err != nil {
			return refuse(http.StatusBadRequest, "invalid Content-Length")
		}
		if f.hasCL && n != f.cl {
			return refuse(http.StatusBadRequest, "conflicting Content-Length values")
		}
		f.hasCL, f.cl = true, n
	case "Transfer-Encoding":
		f.teCount++
		f.te = v
		return nil // hop-by-hop; the request says it through TransferEncoding
	case "Connection":
		f.conn = append(f.conn, v)
	case "Expect":
		f.hasExpect, f.expect = true, v
	}
	if cur, ok := h[key]; ok {
		h[key] = append(cur, v)
		return nil
	}
	vs := *vals
	if len(vs) == cap(vs) {
		vs = make([]string, 0, 32)
	}
	vs = append(vs, v)
	h[key] = vs[len(vs)-1 : len(vs) : len(vs)]
	*vals = vs
	return nil
}

// applyFraming decides the body framing of a parsed head (RFC 9112 §6.3)
// and refuses every ambiguous case.
func (c *conn) applyFraming(r *http.Request, f *framing) *parseError {
	switch {
	case f.hosts > 1:
		return refuse(http.StatusBadRequest, "more than one Host field")
	case f.hosts == 0 && r.ProtoMinor == 1 && r.URL.Host == "":
		return refuse(http.StatusBadRequest, "missing Host field")
	}
	if r.URL.User != nil {
		// RFC 9112 §3.2.2: a sender must not put userinfo in the target; a
		// proxy that dropped it silently would forward another authority
		// than the one the client wrote.
		return refuse(http.StatusBadRequest, "userinfo in the request target")
	}
	r.Host = f.host
	if r.URL.Host != "" && r.Method != "CONNECT" {
		r.Host = r.URL.Host // absolute-form wins (RFC 9112 §3.2.2)
	}
	for _, v := range f.conn {
		if wire.HasToken(v, "close") {
			r.Close = true
		}
	}
	if r.ProtoMinor == 0 && !r.Close {
		r.Close = true
		for _, v := range f.conn {
			if wire.HasToken(v, "keep-alive") {
				r.Close = false
			}
		}
	}
	c.body.expect = false
	switch {
	case f.teCount > 0 && f.hasCL:
		return refuse(http.StatusBadRequest, "both Content-Length and Transfer-Encoding")
	case f.teCount > 0 && r.ProtoMinor == 0:
		return refuse(http.StatusBadRequest, "Transfer-Encoding in an HTTP/1.0 request")
	case f.teCount > 1 || (f.teCount == 1 && !wire.TokenEqual(f.te, "chunked")):
		return refuse(http.StatusNotImplemented, "unsupported Transfer-Encoding")
	case f.teCount == 1:
		r.TransferEncoding, r.ContentLength = chunkedTE, -1
		c.body.b.Reset(c.br, wire.Chunked, 0, nil, 8<<10)
	case f.hasCL && f.cl > 0:
		r.ContentLength = f.cl
		c.body.b.Reset(c.br, wire.Length, f.cl, nil, 0)
	default:
		c.body.b.Reset(c.br, wire.NoBody, 0, nil, 0)
		return c.checkExpect(r, f, false)
	}
	r.Body = &c.body
	c.watch.bodyDone.Store(false)
	return c.checkExpect(r, f, true)
}

func (c *conn) checkExpect(r *http.Request, f *framing, hasBody bool) *parseError {
	if !f.hasExpect {
		return nil
	}
	if !wire.TokenEqual(f.expect, "100-continue") {
		return refuse(http.StatusExpectationFailed, "unsupported Expect")
	}
	r.Header.Del("Expect")
	c.body.expect = hasBody && r.ProtoMinor == 1
	return nil
}

// requestBody is the request body: it sends 100 Continue before the first
// read when the client asked for it, and notes when the body is complete.
type requestBody struct {
	c      *conn
	b      wire.Body
	expect bool
	err    error
}

func (rb *requestBody) Read(p []byte) (int, error) {
	if rb.err != nil {
		return 0, rb.err
	}
	if rb.expect {
		rb.expect = false
		if !rb.c.w.wroteHeader {
			_, _ = rb.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
			if err := rb.c.bw.Flush(); err != nil {
				rb.err = err
				return 0, err
			}
		}
	}
	n, err := rb.b.Read(p)
	if err != nil {
		if rb.b.Done() {
			rb.c.watch.bodyDone.Store(true)
		} else {
			rb.err = err
			rb.c.w.closeAfter = true // the connection's framing is lost
		}
	}
	return n, err
}

func (rb *requestBody) Close() error { return nil }
