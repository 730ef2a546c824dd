package listener

import (
	"bytes"
)

// h2Refusals notices the two answers x/net/http2 gives by itself, before
// any handler runs, so they are counted and logged like the HTTP/1.1
// parser's refusals:
//   - 431 when a request's header list is over the listener's limit;
//   - 400 when a request carries a connection-specific field (Connection,
//     Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade) or a TE
//     other than "trailers".
//
// x/net offers no hook for either (Server.CountError only sees frame and
// stream errors), so the frames the server writes are watched: the answer
// is a DATA frame whose payload is one of x/net's fixed bodies. rampart's
// own answers never are (they all end with "(request id ...)"). A refusal
// to a HEAD request carries no body and is not seen.
type h2Refusals struct {
	hdr  [9]byte
	hdrN int
	skip int // payload bytes of the current frame still to pass over

	body [maxRefusalBody]byte // the payload of a short DATA frame
	want int                  // its length; 0: not collecting
	got  int

	onRefusal func(status int, reason, detail string)
}

const (
	frameData      = 0x0
	maxRefusalBody = 128
)

var (
	h2Body431      = []byte("<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>")
	h2Body400Start = []byte(`request header "`)
	h2Body400End   = []byte(" in HTTP/2\n")
)

// scan advances over bytes the server writes.
func (s *h2Refusals) scan(b []byte) {
	for len(b) > 0 {
		if s.skip > 0 {
			k := min(s.skip, len(b))
			if s.want > 0 {
				s.got += copy(s.body[s.got:s.want], b[:k])
			}
			s.skip -= k
			b = b[k:]
			if s.skip == 0 && s.want > 0 {
				s.check(s.body[:s.want])
				s.want, s.got = 0, 0
			}
			continue
		}
		k := copy(s.hdr[s.hdrN:], b)
		s.hdrN += k
		b = b[k:]
		if s.hdrN < 9 {
			return
		}
		s.hdrN = 0
		s.skip = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
		if s.hdr[3] == frameData && s.skip > 0 && s.skip <= maxRefusalBody {
			s.want = s.skip
		}
	}
}

func (s *h2Refusals) check(body []byte) {
	switch {
	case bytes.Equal(body, h2Body431):
		s.onRefusal(431, "head_too_large", "request header list too large")
	case bytes.HasPrefix(body, h2Body400Start) && bytes.HasSuffix(body, h2Body400End):
		s.onRefusal(400, "header", string(bytes.TrimSuffix(body, []byte("\n"))))
	}
}
