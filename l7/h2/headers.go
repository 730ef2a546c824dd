package h2

import (
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock is a HEADERS frame and its CONTINUATION frames, decoded as
// they arrive (x/net's ReadMetaHeaders cannot bound empty CONTINUATION
// frames, so blocks are assembled here).
type headerBlock struct {
	active     bool
	id         uint32
	endStream  bool
	frames     int
	bytes      int
	limit      uint32 // header list bytes still accepted
	truncated  bool   // over the header list size: answered 431
	invalid    string // the first malformed field: the stream is reset
	sawRegular bool
	deadline   bool // a read deadline bounds the block

	// pseudo-header fields
	method, scheme, authority, path, protocol string
	status                                    bool
	seen                                      uint8 // bit per pseudo field, for duplicates
	fields                                    []hpack.HeaderField
}

func (b *headerBlock) start(id uint32, endStream bool, limit uint32) {
	fields := b.fields[:0]
	*b = headerBlock{active: true, id: id, endStream: endStream, limit: limit, fields: fields}
}

func (b *headerBlock) emit(hf hpack.HeaderField) {
	if b.invalid != "" || b.truncated {
		return // keep decoding (the HPACK table must stay in step), keep nothing
	}
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		b.invalid = "invalid_field_value"
		return
	}
	size := hf.Size()
	if size > b.limit {
		b.truncated = true
		return
	}
	b.limit -= size
	if strings.HasPrefix(hf.Name, ":") {
		if b.sawRegular {
			b.invalid = "pseudo_after_regular"
			return
		}
		var bit uint8
		switch hf.Name {
		case ":method":
			bit, b.method = 1, hf.Value
		case ":scheme":
			bit, b.scheme = 2, hf.Value
		case ":authority":
			bit, b.authority = 4, hf.Value
		case ":path":
			bit, b.path = 8, hf.Value
		case ":protocol":
			bit, b.protocol = 16, hf.Value
		case ":status":
			bit, b.status = 32, true
		default:
			b.invalid = "unknown_pseudo"
			return
		}
		if b.seen&bit != 0 {
			b.invalid = "duplicate_pseudo"
			return
		}
		b.seen |= bit
		return
	}
	b.sawRegular = true
	if !validWireName(hf.Name) {
		b.invalid = "invalid_field_name"
		return
	}
	b.fields = append(b.fields, hf)
}

// validWireName: a token with no upper-case letter (§8.2.1).
func validWireName(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if 'A' <= ch && ch <= 'Z' || !httpguts.IsTokenRune(rune(ch)) {
			return false
		}
	}
	return true
}

func (c *conn) headers(f *http2.HeadersFrame, now time.Time) error {
	id := f.StreamID
	if id%2 == 0 {
		return connError{code: http2.ErrCodeProtocol, reason: "headers_even"}
	}
	frag := f.HeaderBlockFragment()
	if len(frag) == 0 && !f.HeadersEnded() && !c.empties.take(now) {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "empty_headers_flood", abuse: "empty_frames"}
	}
	c.hb.start(id, f.StreamEnded(), c.cfg.maxHeader)
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.hb.invalid = "priority"
	}
	if err := c.fragment(frag); err != nil {
		return err
	}
	if f.HeadersEnded() {
		return c.endBlock()
	}
	// CONTINUATION frames follow: the whole block within ReadHeaderTimeout
	// (nothing else can be read meanwhile, §6.10).
	c.hb.deadline = true
	if !c.draining.Load() {
		_ = c.nc.SetReadDeadline(now.Add(c.cfg.readHeader))
	}
	return nil
}

func (c *conn) continuation(f *http2.ContinuationFrame) error {
	c.hb.frames++
	if c.hb.frames > c.cfg.conts {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "continuation_flood", abuse: "continuation"}
	}
	frag := f.HeaderBlockFragment()
	if len(frag) == 0 && !f.HeadersEnded() && !c.empties.take(time.Now()) {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "empty_continuation_flood", abuse: "continuation"}
	}
	if err := c.fragment(frag); err != nil {
		return err
	}
	if f.HeadersEnded() {
		return c.endBlock()
	}
	return nil
}

// fragment decodes one piece of a header block; the encoded bytes of a
// block are bounded by twice the header list limit (an HPACK encoding is
// never that much larger than what it decodes to).
func (c *conn) fragment(frag []byte) error {
	c.hb.bytes += len(frag)
	if int64(c.hb.bytes) > 2*int64(c.cfg.maxHeader) {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "header_block_too_large", abuse: "header_block"}
	}
	if _, err := c.dec.Write(frag); err != nil {
		return connError{code: http2.ErrCodeCompression, reason: "hpack: " + err.Error()}
	}
	return nil
}

// endBlock acts on a complete header block: a new request, trailers, or a
// stream error.
func (c *conn) endBlock() error {
	b := &c.hb
	b.active = false
	if err := c.dec.Close(); err != nil {
		return connError{code: http2.ErrCodeCompression, reason: "hpack: " + err.Error()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.deadline && !c.draining.Load() {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	id := b.id
	if st := c.streams[id]; st != nil {
		if st.reset || st.remoteClosed {
			return streamError{id: id, code: http2.ErrCodeStreamClosed, reason: "headers_half_closed"}
		}
		return c.trailers(st)
	}
	if id <= c.maxClientID {
		return connError{code: http2.ErrCodeProtocol, reason: "stream_went_down"}
	}
	c.maxClientID = id
	if c.goaway {
		return streamError{id: id, code: http2.ErrCodeRefusedStream, reason: "going_away"}
	}
	if b.invalid != "" {
		return streamError{id: id, code: http2.ErrCodeProtocol, reason: b.invalid}
	}
	if uint32(len(c.streams)) >= c.cfg.maxStreams {
		return streamError{id: id, code: http2.ErrCodeRefusedStream, reason: "over_max_streams"}
	}
	st := c.newStreamLocked(id)
	status, reason := st.buildRequest(b)
	if reason != "" && status == 0 {
		st.release()
		c.recycleLocked(st)
		return streamError{id: id, code: http2.ErrCodeProtocol, reason: reason}
	}
	c.streams[id] = st
	if c.idleTimer != nil && len(c.streams) == 1 {
		c.idleTimer.Stop()
	}
	if b.endStream {
		st.remoteClosed = true
		st.bodyErr = io.EOF
	}
	if status != 0 {
		st.refusal = status
		st.refusalMsg = reason
		if c.s.Rejected != nil {
			c.s.Rejected(c.remote, status, reason)
		}
	}
	c.dispatchLocked(st)
	return nil
}

// trailers takes a request's trailing header block (§8.1).
func (c *conn) trailers(st *stream) error {
	b := &c.hb
	if !b.endStream {
		return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "trailers_not_ended"}
	}
	if b.seen != 0 {
		return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "trailers_pseudo"}
	}
	if b.invalid != "" || b.truncated {
		return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "trailers_bogus"}
	}
	if st.declLen >= 0 && st.gotLen != st.declLen {
		return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "content_length_mismatch"}
	}
	for _, hf := range b.fields {
		key := c.canonical(hf.Name)
		if !httpguts.ValidTrailerHeader(key) {
			return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "trailers_bogus"}
		}
		if st.req.Trailer != nil {
			st.req.Trailer[key] = append(st.req.Trailer[key], hf.Value)
		}
	}
	st.remoteClosed = true
	st.bodyErr = io.EOF
	st.bodyCond.Broadcast()
	c.maybeCloseLocked(st)
	return nil
}

// connHeaders are the connection-specific fields HTTP/2 forbids (§8.2.2).
var connHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade"}

// buildRequest fills the stream's request from a decoded block, with the
// checks of x/net's server (checkPseudos, newWriterAndRequest,
// httpcommon.NewServerRequest, checkValidHTTP2RequestHeaders). A reason
// with status 0 resets the stream (PROTOCOL_ERROR); with a status the
// request is answered with it and its handler never runs.
func (st *stream) buildRequest(b *headerBlock) (status int, reason string) {
	c := st.c
	if b.status {
		return 0, "response_pseudo_in_request"
	}
	if b.protocol != "" {
		return 0, "bad_connect" // extended CONNECT (RFC 8441) is not offered
	}
	if b.method == "CONNECT" {
		if b.path != "" || b.scheme != "" || b.authority == "" {
			return 0, "bad_connect"
		}
	} else if b.method == "" || b.path == "" || (b.scheme != "https" && b.scheme != "http") {
		return 0, "bad_path_method"
	}
	if !httpguts.ValidHostHeader(b.authority) && b.authority != "" {
		return 0, "invalid_authority"
	}
	// :method is not checked to be a token here (x/net does not either):
	// the proxy refuses a bad one with 400 and counts it.
	r := &st.req
	h := st.hdr
	for _, hf := range b.fields {
		k := c.canonical(hf.Name)
		h[k] = append(h[k], hf.Value)
	}
	authority := b.authority
	if host := h["Host"]; len(host) == 1 {
		if authority == "" {
			authority = host[0]
		} else if host[0] != authority {
			return 0, "authority_host_mismatch"
		}
		delete(h, "Host")
	} else if len(host) > 1 {
		return 0, "multiple_host_headers"
	}
	if strings.IndexByte(authority, '@') >= 0 && (b.scheme == "http" || b.scheme == "https") {
		return 0, "userinfo_in_authority"
	}
	if authority != "" && !httpguts.ValidHostHeader(authority) {
		return 0, "invalid_authority"
	}
	r.Method = b.method
	r.Host = authority
	r.RemoteAddr = c.remote
	if b.scheme == "https" {
		r.TLS = c.tls
	}
	if b.method == "CONNECT" {
		st.url.Host = authority
		r.URL = &st.url
		r.RequestURI = authority
	} else {
		if b.path[0] != '/' && b.path != "*" {
			return 0, "bad_path"
		}
		if !parsePath(b.path, &st.url) {
			u, err := url.ParseRequestURI(b.path)
			if err != nil {
				return 0, "bad_path"
			}
			st.url = *u
		}
		r.URL = &st.url
		r.RequestURI = b.path
	}
	// Content-Length (§8.1.1): one value, digits only.
	st.declLen = -1
	if vv := h["Content-Length"]; len(vv) > 0 {
		for _, v := range vv[1:] {
			if v != vv[0] {
				return 0, "content_length_conflict"
			}
		}
		n, err := strconv.ParseUint(vv[0], 10, 63)
		if err != nil || vv[0] == "" || vv[0][0] == '+' {
			return 0, "bad_content_length"
		}
		if len(vv) > 1 {
			h["Content-Length"] = vv[:1]
		}
		st.declLen = int64(n)
		if b.endStream && n != 0 {
			return 0, "content_length_mismatch"
		}
	}
	if httpguts.HeaderValuesContainsToken(h["Expect"], "100-continue") {
		st.needsContinue = !b.endStream
		delete(h, "Expect")
	}
	if cookies := h["Cookie"]; len(cookies) > 1 {
		h["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	for _, v := range h["Trailer"] {
		for _, key := range strings.Split(v, ",") {
			key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key))
			switch key {
			case "Transfer-Encoding", "Trailer", "Content-Length", "":
			default:
				if r.Trailer == nil {
					r.Trailer = http.Header{}
				}
				r.Trailer[key] = nil
			}
		}
	}
	delete(h, "Trailer")
	if b.endStream {
		r.ContentLength = 0
		r.Body = http.NoBody
	} else {
		st.hadBody = true
		r.ContentLength = st.declLen
		r.Body = &st.rb
	}
	if b.truncated {
		return http.StatusRequestHeaderFieldsTooLarge, "request header list too large"
	}
	for _, k := range connHeaders {
		if _, ok := h[k]; ok {
			return http.StatusBadRequest, `request header "` + k + `" is not valid in HTTP/2`
		}
	}
	if te := h["Te"]; len(te) > 0 && (len(te) > 1 || (te[0] != "trailers" && te[0] != "")) {
		return http.StatusBadRequest, `request header "TE" may only be "trailers" in HTTP/2`
	}
	return 0, ""
}

// canonical maps a lower-case wire name to its canonical form, from the
// common set or a per-connection cache (bounded).
func (c *conn) canonical(name string) string {
	if v, ok := commonCanonical[name]; ok {
		return v
	}
	if v, ok := c.canon[name]; ok {
		return v
	}
	v := textproto.CanonicalMIMEHeaderKey(name)
	if c.canon == nil {
		c.canon = map[string]string{}
	}
	if len(c.canon) < 128 {
		c.canon[name] = v
	}
	return v
}

var commonCanonical = map[string]string{}
var commonWire = map[string]wireName{}

func init() {
	for _, k := range []string{"Accept", "Accept-Charset", "Accept-Encoding", "Accept-Language", "Accept-Ranges",
		"Age", "Access-Control-Allow-Origin", "Allow", "Authorization", "Cache-Control", "Cache-Status", "Content-Disposition",
		"Content-Encoding", "Content-Language", "Content-Length", "Content-Location", "Content-Range",
		"Content-Type", "Cookie", "Date", "Etag", "Expect", "Expires", "From", "Host", "If-Match",
		"If-Modified-Since", "If-None-Match", "If-Unmodified-Since", "Last-Modified", "Link", "Location",
		"Max-Forwards", "Origin", "Proxy-Authenticate", "Proxy-Authorization", "Range", "Referer", "Refresh",
		"Retry-After", "Server", "Set-Cookie", "Strict-Transport-Security", "Te", "Trailer", "Transfer-Encoding",
		"User-Agent", "Vary", "Via", "Www-Authenticate", "X-Forwarded-For", "X-Forwarded-Proto", "X-Request-Id",
		"X-Api-Key", "Traceparent", "Tracestate", "Grpc-Status", "Grpc-Message", "Grpc-Timeout", "Grpc-Encoding",
		"Grpc-Accept-Encoding", "Alt-Svc", "Connection", "Keep-Alive", "Proxy-Connection", "Upgrade", "Priority",
		"Sec-Fetch-Dest", "Sec-Fetch-Mode", "Sec-Fetch-Site", "Sec-Fetch-User", "Upgrade-Insecure-Requests"} {
		l := strings.ToLower(k)
		commonCanonical[l] = k
		commonWire[k] = wireName{l, staticIndex[l]}
	}
}
