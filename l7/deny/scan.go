package deny

import "math"

func lowerHex(src, dst []byte) bool {
	for i, c := range src {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		default:
			return false
		}
		dst[i/2] = dst[i/2]<<4 | v
	}
	return true
}

// scanner reads the canonical encoding: literals, unsigned decimals without
// leading zeros, and strings.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i < len(l) || string(s.b[s.i:s.i+len(l)]) != l {
		return false
	}
	s.i += len(l)
	return true
}

func (s *scanner) uint() (uint64, bool) {
	start := s.i
	var v uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
		s.i++
	}
	n := s.i - start
	return v, n > 0 && (n == 1 || s.b[start] != '0')
}

// raw reads a string with no escapes and no control characters.
func (s *scanner) raw() ([]byte, bool) {
	if !s.lit(`"`) {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string whose only escapes are \" and \\, appending its value
// to buf.
func (s *scanner) str(buf []byte) ([]byte, bool) {
	if !s.lit(`"`) {
		return buf, false
	}
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return buf, true
		case c < 0x20:
			return buf, false
		case c == '\\':
			if s.i++; s.i >= len(s.b) || s.b[s.i] != '"' && s.b[s.i] != '\\' {
				return buf, false
			}
			c = s.b[s.i]
		}
		buf = append(buf, c)
	}
	return buf, false
}
