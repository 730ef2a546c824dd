package route

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ErrBadHost wraps every error of ParseAuthority.
var ErrBadHost = errors.New("bad host")

// ParseAuthority checks a Host header (or :authority) against RFC 3986
// §3.2.2–3.2.3, stricter where backends disagree, and returns the host
// routes are matched on (NormalizeHost's form) and the authority to forward:
// that host plus ":port" when a port is given and is not defaultPort.
//
// Accepted: a reg-name of ASCII letters, digits, "-", ".", "_" and "~"
// with no empty label (one trailing dot is allowed and dropped); a dotted
// IPv4 address (which is a reg-name too); "[IPv6]" without a zone.
// Refused: userinfo ("@"), sub-delims (",", ";", "!", ...) and percent
// escapes in a reg-name, IPvFuture, bare IPv6, non-ASCII, an empty host
// with a port, and a port that is not all digits or is above 65535. An
// empty port ("host:") is allowed and dropped (RFC 3986 §6.2.3), as is the
// scheme's default port; leading zeros are dropped. An empty string is
// accepted as no host at all (an HTTP/1.0 request may have none).
//
// A host already in normal form is returned without allocating.
func ParseAuthority(s string, defaultPort int) (host, authority string, err error) {
	if s == "" {
		return "", "", nil
	}
	h, port, hasPort := splitPort(s)
	if h == "" {
		return "", "", fmt.Errorf("%w: %q has no host", ErrBadHost, trunc(s))
	}
	if h[0] == '[' {
		if !validIPLiteral(h) {
			return "", "", fmt.Errorf("%w: %q is not a bracketed IPv6 address", ErrBadHost, trunc(s))
		}
	} else {
		for i := 0; i < len(h); i++ {
			if !regNameChars[h[i]] {
				return "", "", fmt.Errorf("%w: byte %q not allowed in host %q", ErrBadHost, h[i], trunc(s))
			}
		}
		if h[0] == '.' || strings.Contains(h, "..") {
			return "", "", fmt.Errorf("%w: host %q has an empty label", ErrBadHost, trunc(s))
		}
	}
	keepPort := false
	if hasPort && port != "" {
		n, ok := parsePort(port)
		if !ok {
			return "", "", fmt.Errorf("%w: port %q of %q is not a number up to 65535", ErrBadHost, trunc(port), trunc(s))
		}
		if n != defaultPort {
			keepPort = true
			if port[0] == '0' {
				port = strconv.Itoa(n)
			}
		}
	}
	host = NormalizeHost(h)
	switch {
	case !keepPort:
		authority = host
	case len(host)+1+len(port) == len(s) && s[:len(host)] == host:
		authority = s // already normal: no allocation
	default:
		authority = host + ":" + port
	}
	return host, authority, nil
}

// splitPort splits "host[:port]" ("[v6][:port]"); hasPort says a colon
// followed the host. A bare IPv6 address is left whole (and later refused).
func splitPort(s string) (host, port string, hasPort bool) {
	if s[0] == '[' {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return s, "", false
		}
		if i+1 < len(s) && s[i+1] == ':' {
			return s[:i+1], s[i+2:], true
		}
		return s, "", false // anything else after "]" fails as a literal
	}
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// validIPLiteral accepts "[IPv6]" with no zone and nothing after "]".
func validIPLiteral(h string) bool {
	if len(h) < 4 || h[len(h)-1] != ']' || strings.IndexByte(h, '%') >= 0 {
		return false
	}
	a, err := netip.ParseAddr(h[1 : len(h)-1])
	return err == nil && a.Is6()
}

func parsePort(p string) (int, bool) {
	if len(p) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 65535
}

// regNameChars are the bytes of a reg-name rampart accepts: RFC 3986's
// unreserved characters. Sub-delims and percent escapes are valid in a URI
// but not in a DNS name, and a "," or ";" in a forwarded Host can be read as
// a list by a backend.
var regNameChars = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~'
	}
	return t
}()

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
