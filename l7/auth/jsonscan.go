package auth

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// members walks the top-level members of a JSON object without allocating.
// The input must have passed json.Valid and start with '{' (after
// whitespace); members only skips values, it does not validate them.
type members struct {
	b []byte
	i int
}

func newMembers(obj []byte) (members, bool) {
	m := members{b: obj}
	m.ws()
	if m.i >= len(m.b) || m.b[m.i] != '{' {
		return m, false
	}
	m.i++
	return m, true
}

// next returns the raw key (with its quotes) and raw value of the next
// member; ok is false at the end of the object.
func (m *members) next() (key, val []byte, ok bool) {
	m.ws()
	if m.i < len(m.b) && m.b[m.i] == ',' {
		m.i++
		m.ws()
	}
	if m.i >= len(m.b) || m.b[m.i] != '"' {
		return nil, nil, false // '}' or the end
	}
	start := m.i
	m.skipString()
	if m.i > len(m.b) {
		return nil, nil, false
	}
	key = m.b[start:m.i]
	m.ws()
	m.i++ // ':'
	m.ws()
	start = m.i
	m.skipValue()
	if m.i == start || m.i > len(m.b) {
		return nil, nil, false // not valid JSON: never for checked input
	}
	return key, m.b[start:m.i], true
}

// newElements walks the elements of a JSON array (valid JSON, as for
// newMembers) with nextElem.
func newElements(arr []byte) (members, bool) {
	m := members{b: arr}
	m.ws()
	if m.i >= len(m.b) || m.b[m.i] != '[' {
		return m, false
	}
	m.i++
	return m, true
}

// nextElem returns the raw value of the next array element.
func (m *members) nextElem() (val []byte, ok bool) {
	m.ws()
	if m.i < len(m.b) && m.b[m.i] == ',' {
		m.i++
		m.ws()
	}
	if m.i >= len(m.b) || m.b[m.i] == ']' {
		return nil, false
	}
	start := m.i
	m.skipValue()
	if m.i == start || m.i > len(m.b) {
		return nil, false
	}
	return m.b[start:m.i], true
}

func (m *members) ws() {
	for m.i < len(m.b) {
		switch m.b[m.i] {
		case ' ', '\t', '\n', '\r':
			m.i++
		default:
			return
		}
	}
}

// skipString moves past the string that starts at m.i.
func (m *members) skipString() {
	m.i++
	for m.i < len(m.b) {
		switch m.b[m.i] {
		case '\\':
			m.i += 2
			continue
		case '"':
			m.i++
			return
		}
		m.i++
	}
}

func (m *members) skipValue() {
	if m.i >= len(m.b) {
		return
	}
	switch m.b[m.i] {
	case '"':
		m.skipString()
	case '{', '[':
		depth := 0
		for m.i < len(m.b) {
			switch m.b[m.i] {
			case '"':
				m.skipString()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					m.i++
					return
				}
			}
			m.i++
		}
	default: // number, true, false, null
		for m.i < len(m.b) {
			switch m.b[m.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			m.i++
		}
	}
}

// keyIs reports whether the raw (quoted) key names name exactly.
func keyIs(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == name
}

// stringValue returns the content of a raw JSON string value. Without
// escapes it is a sub-slice of raw (no allocation); otherwise a decoded copy.
// ok is false for non-strings and for values with control characters,
// which could otherwise travel upstream in identity headers.
func stringValue(raw []byte) (v []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	v = raw[1 : len(raw)-1]
	if bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		v = []byte(s)
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return nil, false
		}
	}
	return v, true
}

// numericDate parses a JSON number of seconds since the epoch (RFC 7519
// NumericDate, fractions allowed) into a time, saturating far outside the
// representable range.
func numericDate(raw []byte) (time.Time, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return time.Time{}, false
	}
	var n int64
	plain := len(raw) <= 15 // integer literals fit in int64 without overflow checks
	for i, c := range raw {
		if c < '0' || c > '9' {
			if !(i == 0 && c == '-') {
				plain = false
				break
			}
			continue
		}
		n = n*10 + int64(c-'0')
	}
	if plain {
		if raw[0] == '-' {
			if len(raw) == 1 {
				return time.Time{}, false
			}
			n = -n
		}
		return time.Unix(n, 0), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) {
		return time.Time{}, false
	}
	const limit = 1 << 40 // ~35,000 years: far enough, and exact in float64
	f = math.Max(-limit, math.Min(limit, f))
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64((f-sec)*1e9)), true
}

// plainValue formats a JSON string, number or boolean as plain text:
// strings unquoted, numbers without exponent where they are integers.
func plainValue(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		v, ok := stringValue(raw)
		return string(v), ok
	case c == 't' || c == 'f':
		return string(raw), true
	case c == '-' || (c >= '0' && c <= '9'):
		if bytes.IndexAny(raw, ".eE") < 0 {
			return string(raw), true
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return "", false
		}
		return strconv.FormatFloat(f, 'f', -1, 64), true
	}
	return "", false // null, objects, arrays
}
