package listener

import (
	"crypto/tls"
	"errors"
	"time"
)

// h2Guard watches the frame headers of a server-side HTTP/2 connection as
// they are read, without buffering or parsing payloads, and closes the
// connection when the client abuses it:
//   - RST_STREAM frames beyond maxResets per second, sustained (a token
//     bucket with that rate and a burst of the same size), the "rapid
//     reset" attack (CVE-2023-44487);
//   - a header block split into more than maxContinuations CONTINUATION
//     frames (the CONTINUATION flood).
type h2Guard struct {
	*tls.Conn
	onAbuse func(reason string)

	preface int     // client preface bytes still to skip
	hdr     [9]byte // the frame header being assembled
	hdrN    int
	skip    int // payload bytes of the current frame still to pass over

	rate   float64
	tokens float64
	last   time.Time
	conts  int
	broken bool

	out h2Refusals // watches what the server writes (h2refuse.go)
}

const (
	h2PrefaceLen     = 24
	maxContinuations = 128
	frameRSTStream   = 0x3
	frameHeaders     = 0x1
	frameContinue    = 0x9
	flagEndHeaders   = 0x4
)

var errH2Abuse = errors.New("http2 connection closed for abuse")

func newH2Guard(c *tls.Conn, maxResets int, onAbuse func(string)) *h2Guard {
	return &h2Guard{Conn: c, onAbuse: onAbuse, preface: h2PrefaceLen,
		rate: float64(maxResets), tokens: float64(maxResets)}
}

// Write passes the server's frames on, watching for the refusals x/net
// answers by itself when onRefusal is set.
func (g *h2Guard) Write(p []byte) (int, error) {
	if g.out.onRefusal != nil {
		g.out.scan(p)
	}
	return g.Conn.Write(p)
}

func (g *h2Guard) Read(p []byte) (int, error) {
	if g.broken {
		return 0, errH2Abuse
	}
	n, err := g.Conn.Read(p)
	if reason := g.scan(p[:n]); reason != "" {
		g.broken = true
		g.onAbuse(reason)
		_ = g.Conn.Close()
		return 0, errH2Abuse
	}
	return n, err
}

// scan advances the frame state machine over b and returns a reason when
// the connection must be closed.
func (g *h2Guard) scan(b []byte) string {
	for len(b) > 0 {
		switch {
		case g.preface > 0:
			k := min(g.preface, len(b))
			g.preface -= k
			b = b[k:]
		case g.skip > 0:
			k := min(g.skip, len(b))
			g.skip -= k
			b = b[k:]
		default:
			k := copy(g.hdr[g.hdrN:], b)
			g.hdrN += k
			b = b[k:]
			if g.hdrN < 9 {
				return ""
			}
			g.hdrN = 0
			g.skip = int(g.hdr[0])<<16 | int(g.hdr[1])<<8 | int(g.hdr[2])
			if reason := g.frame(g.hdr[3]); reason != "" {
				return reason
			}
		}
	}
	return ""
}

func (g *h2Guard) frame(typ byte) string {
	switch typ {
	case frameRSTStream:
		now := time.Now()
		if !g.last.IsZero() {
			g.tokens = min(g.rate, g.tokens+now.Sub(g.last).Seconds()*g.rate)
		}
		g.last = now
		g.tokens--
		if g.tokens < 0 {
			return "resets"
		}
	case frameHeaders:
		g.conts = 0
	case frameContinue:
		g.conts++
		if g.conts > maxContinuations {
			return "continuation"
		}
	}
	return ""
}
