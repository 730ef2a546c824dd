package route

import "strings"

// NormalizeHost brings a Host header (or :authority) to the form route hosts
// are written in: ASCII lower-case, without ":port" ("[v6]:port" keeps its
// brackets; a bare v6 literal keeps its colons), without one trailing dot. It
// allocates only when it has to lower-case.
func NormalizeHost(h string) string {
	if len(h) > 0 && h[0] == '[' {
		if i := strings.IndexByte(h, ']'); i > 0 {
			h = h[:i+1]
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i+1:], ':') < 0 {
		h = h[:i]
	}
	if len(h) > 1 && h[len(h)-1] == '.' {
		h = h[:len(h)-1]
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; c >= 'A' && c <= 'Z' {
			return lower(h, i)
		}
	}
	return h
}

// lower lower-cases ASCII letters of h from index i on, in one allocation.
func lower(h string, i int) string {
	var b strings.Builder
	b.Grow(len(h))
	b.WriteString(h[:i])
	for ; i < len(h); i++ {
		c := h[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}
