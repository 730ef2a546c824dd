package snapshot

import (
	"fmt"
	"net/textproto"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// RouteMatch narrows a route to requests whose header fields and query
// parameters pass every matcher listed (all must pass). A route with
// matchers wins over a route without them of the same host, template shape
// and method; two routes with matchers that could both pass one request are
// a validation error (see MatchesMayOverlap).
type RouteMatch struct {
	Headers []FieldMatch `yaml:"headers" json:"headers,omitempty"`
	Query   []FieldMatch `yaml:"query" json:"query,omitempty"`
}

// FieldMatch tests one header field (name case-insensitive; several fields
// of the name are joined with ", ", Cookie with "; ") or one query parameter
// (name and value compared percent-decoded, "+" as a space; several
// occurrences joined with ","). Exactly one of Exact, Prefix, Present,
// Absent and Regex is set. Regex is RE2 syntax and must match the whole
// value.
type FieldMatch struct {
	Name    string  `yaml:"name" json:"name"`
	Exact   *string `yaml:"exact" json:"exact,omitempty"`
	Prefix  string  `yaml:"prefix" json:"prefix,omitempty"`
	Present bool    `yaml:"present" json:"present,omitempty"`
	Absent  bool    `yaml:"absent" json:"absent,omitempty"`
	Regex   string  `yaml:"regex" json:"regex,omitempty"`
}

// Bounds of route matchers.
const (
	MaxRouteMatchers   = 8   // headers and query together, per route
	MaxMatchValueBytes = 256 // an exact or prefix value, a regex's source
	MaxMatchNameBytes  = 128
	MaxRegexProgInsts  = 512 // instructions of a compiled regex
)

// MatchKind is which test a FieldMatch makes.
type MatchKind uint8

const (
	MatchExact MatchKind = iota
	MatchPrefix
	MatchPresent
	MatchAbsent
	MatchRegex
)

// Kind returns the test m makes, or an error when none or several are set.
func (m FieldMatch) Kind() (MatchKind, error) {
	var kinds []MatchKind
	if m.Exact != nil {
		kinds = append(kinds, MatchExact)
	}
	if m.Prefix != "" {
		kinds = append(kinds, MatchPrefix)
	}
	if m.Present {
		kinds = append(kinds, MatchPresent)
	}
	if m.Absent {
		kinds = append(kinds, MatchAbsent)
	}
	if m.Regex != "" {
		kinds = append(kinds, MatchRegex)
	}
	if len(kinds) != 1 {
		return 0, fmt.Errorf("matcher %q must set exactly one of exact, prefix, present, absent and regex", m.Name)
	}
	return kinds[0], nil
}

// CompileMatchRegex compiles a matcher's regex anchored at both ends,
// refusing sources over MaxMatchValueBytes and programs over
// MaxRegexProgInsts instructions (RE2 runs in time linear in the input,
// so the bound is on memory and per-byte cost).
func CompileMatchRegex(src string) (*regexp.Regexp, error) {
	if len(src) > MaxMatchValueBytes {
		return nil, fmt.Errorf("regex is %d bytes, more than %d", len(src), MaxMatchValueBytes)
	}
	full := `^(?:` + src + `)$`
	re, err := syntax.Parse(full, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", src, err)
	}
	if len(prog.Inst) > MaxRegexProgInsts {
		return nil, fmt.Errorf("regex %q compiles to %d instructions, more than %d", src, len(prog.Inst), MaxRegexProgInsts)
	}
	return regexp.Compile(full)
}

// CanonicalMatchHeader is the form a header matcher's name is looked up in
// (the canonical key of Go's header maps).
func CanonicalMatchHeader(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }

func validateMatch(c *Config, p *problems, where string, r Route) {
	m := r.Match
	if m == nil {
		return
	}
	if len(m.Headers)+len(m.Query) == 0 {
		p.add("%s: match lists no headers and no query matchers (omit it)", where)
		return
	}
	if n := len(m.Headers) + len(m.Query); n > MaxRouteMatchers {
		p.add("%s: match has %d matchers, more than %d", where, n, MaxRouteMatchers)
	}
	ih := c.IdentityHeaders
	identity := []string{ih.Tenant, ih.Subject, ih.KeyID, ih.Scopes}
	for _, side := range []struct {
		name string
		ms   []FieldMatch
	}{{"headers", m.Headers}, {"query", m.Query}} {
		seen := map[string]bool{}
		for _, fm := range side.ms {
			at := fmt.Sprintf("%s: match.%s %q", where, side.name, fm.Name)
			key := fm.Name
			if side.name == "headers" {
				key = strings.ToLower(key)
				switch {
				case !validHeaderName(fm.Name):
					p.add("%s: not a header name", at)
				case hopByHop(fm.Name) || strings.EqualFold(fm.Name, "set-cookie"):
					p.add("%s: a hop-by-hop, Host, Content-Length or Set-Cookie field cannot be matched", at)
				case slices.ContainsFunc(identity, func(x string) bool { return x != "" && strings.EqualFold(x, fm.Name) }):
					p.add("%s: carries the verified identity, which is stripped before routing", at)
				}
			} else if fm.Name == "" {
				p.add("%s: name is missing", at)
			}
			if len(fm.Name) > MaxMatchNameBytes {
				p.add("%s: name is longer than %d bytes", at, MaxMatchNameBytes)
			}
			if seen[key] {
				p.add("%s: matched twice (combine the tests into one)", at)
			}
			seen[key] = true
			kind, err := fm.Kind()
			if err != nil {
				p.add("%s: %v", at, err)
				continue
			}
			switch kind {
			case MatchExact:
				if len(*fm.Exact) > MaxMatchValueBytes {
					p.add("%s: exact value is longer than %d bytes", at, MaxMatchValueBytes)
				}
			case MatchPrefix:
				if len(fm.Prefix) > MaxMatchValueBytes {
					p.add("%s: prefix is longer than %d bytes", at, MaxMatchValueBytes)
				}
			case MatchRegex:
				if _, err := CompileMatchRegex(fm.Regex); err != nil {
					p.add("%s: %v", at, err)
				}
			}
		}
	}
}

// MatchesMayOverlap decides, conservatively, whether one request could pass
// the matchers of both a and b (nil: no matchers, which every request
// passes). They are disjoint only when some field is tested by both in ways
// no value satisfies together:
//
//   - absent against any other test of the field;
//   - two exact values that differ;
//   - an exact value against a prefix it does not start with, or a regex
//     it does not match;
//   - two prefixes neither of which starts with the other.
//
// Everything else (two regexes, a regex and a prefix, present and anything
// but absent) is taken to overlap. Header names compare case-insensitively,
// query names exactly.
func MatchesMayOverlap(a, b *RouteMatch) bool {
	if a == nil || b == nil {
		return true
	}
	return !(fieldsDisjoint(a.Headers, b.Headers, strings.EqualFold) ||
		fieldsDisjoint(a.Query, b.Query, func(x, y string) bool { return x == y }))
}

func fieldsDisjoint(as, bs []FieldMatch, same func(x, y string) bool) bool {
	for _, x := range as {
		for _, y := range bs {
			if same(x.Name, y.Name) && testsDisjoint(x, y) {
				return true
			}
		}
	}
	return false
}

func testsDisjoint(x, y FieldMatch) bool {
	kx, errx := x.Kind()
	ky, erry := y.Kind()
	if errx != nil || erry != nil {
		return false
	}
	if kx > ky {
		x, y, kx, ky = y, x, ky, kx
	}
	switch {
	case kx == MatchAbsent || ky == MatchAbsent:
		return kx != ky
	case kx == MatchExact && ky == MatchExact:
		return *x.Exact != *y.Exact
	case kx == MatchExact && ky == MatchPrefix:
		return !strings.HasPrefix(*x.Exact, y.Prefix)
	case kx == MatchExact && ky == MatchRegex:
		re, err := CompileMatchRegex(y.Regex)
		return err == nil && !re.MatchString(*x.Exact)
	case kx == MatchPrefix && ky == MatchPrefix:
		return !strings.HasPrefix(x.Prefix, y.Prefix) && !strings.HasPrefix(y.Prefix, x.Prefix)
	}
	return false
}

// MatchConflict reports whether two routes of one host and template shape
// with overlapping methods conflict, given their matchers: both without
// matchers, or both with matchers that may overlap. A route with matchers
// and one without do not: the one with matchers is tried first.
func MatchConflict(a, b *RouteMatch) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return MatchesMayOverlap(a, b)
}
