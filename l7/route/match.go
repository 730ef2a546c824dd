package route

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Request is what header and query matchers look at. Header is keyed by
// canonical field names (as net/http and l7/h1 store them); Query is the raw
// query without "?". A nil *Request is a request with no header fields and
// no query.
type Request struct {
	Header map[string][]string
	Query  string
}

// conds are one route's compiled matchers; all must pass.
type conds []cond

type cond struct {
	kind   snapshot.MatchKind
	header bool
	name   string // canonical header key, or the query parameter name
	sep    string // joins repeated header fields: ", " (Cookie: "; ")
	value  string // exact value or prefix
	re     *regexp.Regexp
}

func compileConds(m *snapshot.RouteMatch) (conds, error) {
	var out conds
	add := func(fm snapshot.FieldMatch, header bool) error {
		kind, err := fm.Kind()
		if err != nil {
			return err
		}
		c := cond{kind: kind, header: header, name: fm.Name, sep: ","}
		if header {
			c.name, c.sep = snapshot.CanonicalMatchHeader(fm.Name), ", "
			if c.name == "Cookie" {
				c.sep = "; "
			}
		}
		switch kind {
		case snapshot.MatchExact:
			c.value = *fm.Exact
		case snapshot.MatchPrefix:
			c.value = fm.Prefix
		case snapshot.MatchRegex:
			if c.re, err = snapshot.CompileMatchRegex(fm.Regex); err != nil {
				return fmt.Errorf("matcher %q: %w", fm.Name, err)
			}
		}
		out = append(out, c)
		return nil
	}
	for _, fm := range m.Headers {
		if err := add(fm, true); err != nil {
			return nil, err
		}
	}
	for _, fm := range m.Query {
		if err := add(fm, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pass reports whether the request passes every matcher. It allocates only
// to join a header sent in several fields, or a query parameter that is
// repeated or holds escapes or "+".
func (cs conds) pass(rq *Request) bool {
	for i := range cs {
		c := &cs[i]
		var v string
		var ok bool
		if rq != nil {
			if c.header {
				v, ok = headerValue(rq.Header[c.name], c.sep)
			} else {
				v, ok = queryValue(rq.Query, c.name)
			}
		}
		if !c.test(v, ok) {
			return false
		}
	}
	return true
}

func (c *cond) test(v string, ok bool) bool {
	switch c.kind {
	case snapshot.MatchAbsent:
		return !ok
	case snapshot.MatchPresent:
		return ok
	case snapshot.MatchExact:
		return ok && v == c.value
	case snapshot.MatchPrefix:
		return ok && strings.HasPrefix(v, c.value)
	default:
		return ok && c.re.MatchString(v)
	}
}

// headerValue joins the fields of one name as RFC 9110 §5.3 combines them.
func headerValue(vs []string, sep string) (string, bool) {
	switch len(vs) {
	case 0:
		return "", false
	case 1:
		return vs[0], true
	}
	return strings.Join(vs, sep), true
}

// queryValue finds the parameter name in a raw query (pairs split on "&",
// name and value on the first "="; a pair without "=" has the empty value)
// and returns its decoded value, the values of several occurrences joined
// with ",". An undecodable pair is skipped (CheckQuery refuses such queries
// before routing).
func queryValue(q, name string) (string, bool) {
	var first string
	var joined []byte
	n := 0
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if !decodedEqual(k, name) {
			continue
		}
		if n == 0 {
			first = v
		} else {
			if n == 1 {
				joined = appendDecoded(nil, first)
			}
			joined = appendDecoded(append(joined, ','), v)
		}
		n++
	}
	switch {
	case n == 0:
		return "", false
	case n > 1:
		return string(joined), true
	case strings.ContainsAny(first, "%+"):
		return string(appendDecoded(nil, first)), true
	}
	return first, true
}

// decodedEqual reports whether the query component raw decodes to s,
// without allocating.
func decodedEqual(raw, s string) bool {
	j := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]):
			c = snapshot.Unhex(raw[i+1])<<4 | snapshot.Unhex(raw[i+2])
			i += 2
		}
		if j >= len(s) || s[j] != c {
			return false
		}
		j++
	}
	return j == len(s)
}

func appendDecoded(b []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]):
			c = snapshot.Unhex(raw[i+1])<<4 | snapshot.Unhex(raw[i+2])
			i += 2
		}
		b = append(b, c)
	}
	return b
}
