package accesslog

import "strings"

// redactQuery replaces the values of the named parameters in a raw query
// string with "[redacted]", leaving every other byte as sent. Parameters
// are split on '&' and on ';' (some servers split on it, so a secret after
// one must not slip through), and names are compared after decoding
// percent-escapes and '+' the way a lenient server would. It allocates
// only when it replaces something.
func redactQuery(q string, names map[string]struct{}) string {
	if len(names) == 0 || q == "" {
		return q
	}
	var b []byte // nil until the first replacement
	copied := 0  // q[:copied] is in b
	for i := 0; i <= len(q); {
		end := len(q)
		if j := strings.IndexAny(q[i:], "&;"); j >= 0 {
			end = i + j
		}
		seg := q[i:end]
		if eq := strings.IndexByte(seg, '='); eq >= 0 && queryNameIn(seg[:eq], names) {
			if b == nil {
				b = make([]byte, 0, len(q)+len(redacted))
			}
			b = append(b, q[copied:i+eq+1]...)
			b = append(b, redacted...)
			copied = end
		}
		i = end + 1
	}
	if b == nil {
		return q
	}
	return string(append(b, q[copied:]...))
}

// queryNameIn reports whether a raw parameter name, decoded, is in names.
func queryNameIn(raw string, names map[string]struct{}) bool {
	if _, ok := names[raw]; ok {
		return true
	}
	if !strings.ContainsAny(raw, "%+") {
		return false
	}
	_, ok := names[lenientUnescape(raw)]
	return ok
}

// lenientUnescape decodes %XX escapes and '+' and keeps malformed escapes
// as they are.
func lenientUnescape(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
