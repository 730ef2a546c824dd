package deny

// scanner reads the canonical list encoding: literals and strings.
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
