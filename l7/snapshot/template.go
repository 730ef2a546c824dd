package snapshot

import (
	"errors"
	"fmt"
	"strings"
)

// MaxTemplateParams bounds the parameters one path template may capture, so a
// match can hold them in a fixed array and never allocate.
const MaxTemplateParams = 8

// SegmentKind says how a template segment matches one path segment.
type SegmentKind uint8

const (
	// Literal matches exactly its text (in normalised form).
	Literal SegmentKind = iota
	// Param, written {name}, matches any one non-empty segment.
	Param
	// Rest, written {name...}, matches one or more remaining segments; last only.
	Rest
)

// Segment is one "/"-separated piece of a parsed template.
type Segment struct {
	Kind SegmentKind
	Text string // the literal text, or the parameter name
}

// Template is a parsed path template such as /v1/users/{id}.
type Template struct {
	Raw      string
	Segments []Segment // "/" has none; "/a/" ends with an empty literal
}

// Params returns the parameter names in order of appearance.
func (t Template) Params() []string {
	var names []string
	for _, s := range t.Segments {
		if s.Kind != Literal {
			names = append(names, s.Text)
		}
	}
	return names
}

// Shape is the template with parameter names erased: /v1/users/{} or
// /files/{...}. Two templates with equal shapes match exactly the same paths
// with the same precedence.
func (t Template) Shape() string {
	if len(t.Segments) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range t.Segments {
		b.WriteByte('/')
		switch s.Kind {
		case Literal:
			b.WriteString(s.Text)
		case Param:
			b.WriteString("{}")
		case Rest:
			b.WriteString("{...}")
		}
	}
	return b.String()
}

var errEmptySegment = errors.New("empty segment (\"//\") is not allowed")

// ParseTemplate parses a path template. The grammar: the template starts with
// "/"; each segment is a literal in normalised form (see route normalisation:
// no dot segments, no encoded slash, upper-case percent-escapes only for bytes
// that are not unreserved), a parameter {name}, or, as the last segment only,
// a rest parameter {name...}. Names are [A-Za-z_][A-Za-z0-9_]* and unique.
// Only the last segment may be empty (a trailing slash).
func ParseTemplate(s string) (Template, error) {
	t := Template{Raw: s}
	if s == "" {
		return t, errors.New("path template is empty")
	}
	if s[0] != '/' {
		return t, fmt.Errorf("path template %q must start with \"/\"", s)
	}
	if s == "/" {
		return t, nil
	}
	parts := strings.Split(s[1:], "/")
	seen := map[string]bool{}
	for i, p := range parts {
		last := i == len(parts)-1
		seg, err := parseSegment(p, last)
		if err != nil {
			return t, fmt.Errorf("path template %q segment %d: %w", s, i+1, err)
		}
		if seg.Kind != Literal {
			if seen[seg.Text] {
				return t, fmt.Errorf("path template %q: parameter {%s} appears twice", s, seg.Text)
			}
			seen[seg.Text] = true
		}
		t.Segments = append(t.Segments, seg)
	}
	if len(seen) > MaxTemplateParams {
		return t, fmt.Errorf("path template %q has %d parameters, at most %d are allowed", s, len(seen), MaxTemplateParams)
	}
	return t, nil
}

func parseSegment(p string, last bool) (Segment, error) {
	if p == "" {
		if last {
			return Segment{Kind: Literal}, nil
		}
		return Segment{}, errEmptySegment
	}
	if p[0] == '{' {
		if p[len(p)-1] != '}' {
			return Segment{}, fmt.Errorf("%q: a parameter must fill the whole segment", p)
		}
		name := p[1 : len(p)-1]
		kind := Param
		if strings.HasSuffix(name, "...") {
			kind = Rest
			name = strings.TrimSuffix(name, "...")
			if !last {
				return Segment{}, fmt.Errorf("%q: a rest parameter {name...} must be the last segment", p)
			}
		}
		if !validParamName(name) {
			return Segment{}, fmt.Errorf("%q: parameter name %q must match [A-Za-z_][A-Za-z0-9_]*", p, name)
		}
		return Segment{Kind: kind, Text: name}, nil
	}
	if strings.ContainsAny(p, "{}") {
		return Segment{}, fmt.Errorf("%q: a parameter must fill the whole segment", p)
	}
	if p == "." || p == ".." {
		return Segment{}, fmt.Errorf("%q: dot segments are not allowed", p)
	}
	if err := checkLiteral(p); err != nil {
		return Segment{}, fmt.Errorf("%q: %w", p, err)
	}
	return Segment{Kind: Literal, Text: p}, nil
}

func validParamName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// checkLiteral accepts RFC 3986 pchars in the normal form the request path is
// brought to before matching, so a literal can never be unreachable.
func checkLiteral(p string) error {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' {
			if i+2 >= len(p) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) {
				return errors.New("a percent-escape must be % and two upper-case hex digits")
			}
			b := Unhex(p[i+1])<<4 | Unhex(p[i+2])
			if IsUnreserved(b) {
				return fmt.Errorf("%%%c%c encodes the unreserved %q: write it plainly", p[i+1], p[i+2], b)
			}
			if b == '/' || b == '\\' {
				return errors.New("an encoded slash or backslash cannot appear in a literal")
			}
			if b == 0 {
				return errors.New("%00 cannot appear in a path")
			}
			i += 2
			continue
		}
		if !IsPathChar(c) {
			return fmt.Errorf("byte %q is not allowed in a path", c)
		}
	}
	return nil
}

// IsUnreserved reports RFC 3986 unreserved characters.
func IsUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// IsPathChar reports bytes allowed unescaped in a path segment (RFC 3986 pchar
// without "%", which is handled as an escape).
func IsPathChar(c byte) bool {
	if IsUnreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return false
}

func isUpperHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' }

// Unhex is the value of a hex digit (either case).
func Unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}
