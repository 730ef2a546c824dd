package route

import (
	"slices"
	"strings"
)

// Lookup matches a request without header fields or query: host as
// NormalizeHost returns it, path as NormalizePath returns it. It fills m and
// does not allocate.
func (t *Table) Lookup(host, method, path string, m *Match) {
	t.LookupRequest(host, method, path, nil, m)
}

// LookupRequest is Lookup for a request whose header fields and query the
// routes' matchers test. Among the routes of one template and method, those
// with matchers are tried first, then the one without; a route whose
// matchers fail is passed over like one that does not accept the method,
// except that the status is then 404, not 405. It does not allocate unless
// a matcher tests a header sent in several fields or a query parameter that
// is repeated or escaped.
func (t *Table) LookupRequest(host, method, path string, rq *Request, m *Match) {
	m.Route, m.Status, m.NParams = -1, 404, 0
	root := t.group(host)
	if root < 0 || path == "" || path[0] != '/' {
		return
	}
	w := walker{t: t, path: path, method: method, bit: t.methodBit(method), rq: rq}
	if w.visit(m, root, start(path), 0) {
		m.Status = 200
	} else if w.pathMatched && !w.methodMatched {
		m.Status = 405
	}
}

// Allow lists, sorted and joined with ", ", the methods accepted by the
// routes in the host's group whose templates match the path: the Allow
// header of a 405. Routes that accept every method are not listed.
func (t *Table) Allow(host, path string) string {
	root := t.group(host)
	if root < 0 || path == "" || path[0] != '/' {
		return ""
	}
	var c collector
	t.collect(&c, root, path, start(path))
	var names []string
	for i, name := range t.methods {
		if c.mask&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	for _, r := range c.extra {
		for _, name := range t.extra[r] {
			if t.overflow[name] && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// group returns the root node of the host group the host selects, or -1.
func (t *Table) group(host string) int32 {
	if r, ok := t.exact[host]; ok {
		return r
	}
	if t.maxWild > 0 {
		// Longest suffix first; the label before it must be non-empty, and
		// suffixes longer than every wildcard are not hashed at all.
		for i := max(1, len(host)-t.maxWild); i < len(host); i++ {
			if host[i] == '.' {
				if r, ok := t.wild[host[i:]]; ok {
					return r
				}
			}
		}
	}
	return t.star
}

func (t *Table) methodBit(method string) uint64 {
	for i, name := range t.methods {
		if name == method {
			return 1 << i
		}
	}
	if t.overflow[method] {
		return overflowBit
	}
	return 0
}

// start is the offset of the first segment of path, or len(path)+1 for "/",
// which has none. next returns a segment and the offset of the one after.
func start(path string) int {
	if len(path) == 1 {
		return 2
	}
	return 1
}

func next(path string, pos int) (seg string, after int) {
	if i := strings.IndexByte(path[pos:], '/'); i >= 0 {
		return path[pos : pos+i], pos + i + 1
	}
	return path[pos:], len(path) + 1
}

type walker struct {
	t           *Table
	path        string
	method      string
	bit         uint64
	rq          *Request
	pathMatched bool
	// methodMatched: a route accepted the method but its matchers failed.
	methodMatched bool
}

// visit searches depth-first, in precedence order, below node ni for a route
// that accepts the method; pos is the offset of the next path segment and np
// the number of parameters captured so far in m. Each node is reached with one
// pos only, so a lookup visits every node at most once.
func (w *walker) visit(m *Match, ni int32, pos, np int) bool {
	t := w.t
	n := &t.nodes[ni]
	if pos > len(w.path) {
		return w.pick(m, t.entries[n.ents:n.ents+n.nend], np)
	}
	seg, after := next(w.path, pos)
	if c := t.child(n, seg); c >= 0 && w.visit(m, c, after, np) {
		return true
	}
	if n.param >= 0 && seg != "" && np < len(m.Params) {
		m.Params[np] = seg
		if w.visit(m, n.param, after, np+1) {
			return true
		}
	}
	if n.nrest > 0 && pos < len(w.path) && np < len(m.Params) {
		rest := t.entries[n.ents+n.nend : n.ents+n.nend+n.nrest]
		if w.pick(m, rest, np+1) {
			m.Params[np] = w.path[pos:]
			return true
		}
	}
	return false
}

// pick chooses the route among entries that accepts the method.
func (w *walker) pick(m *Match, entries []entry, np int) bool {
	for _, e := range entries {
		w.pathMatched = true
		if e.any || e.mask&w.bit != 0 && (w.bit != overflowBit || slices.Contains(w.t.extra[e.route], w.method)) {
			if e.cond && !w.t.conds[e.route].pass(w.rq) {
				w.methodMatched = true
				continue
			}
			m.Route, m.NParams = e.route, np
			return true
		}
	}
	return false
}

// child returns the literal child of n for seg, or -1.
func (t *Table) child(n *node, seg string) int32 {
	es := t.edges[n.lits : n.lits+n.nlits]
	if len(es) <= 8 {
		for i := range es {
			if es[i].text == seg {
				return es[i].child
			}
		}
		return -1
	}
	lo, hi := 0, len(es)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if es[mid].text < seg {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(es) && es[lo].text == seg {
		return es[lo].child
	}
	return -1
}

// collector gathers, for Allow, the methods of every matching route.
type collector struct {
	mask  uint64
	extra []int32 // routes whose methods use the overflow bit
}

func (t *Table) collect(c *collector, ni int32, path string, pos int) {
	n := &t.nodes[ni]
	if pos > len(path) {
		c.add(t, t.entries[n.ents:n.ents+n.nend])
		return
	}
	seg, after := next(path, pos)
	if ch := t.child(n, seg); ch >= 0 {
		t.collect(c, ch, path, after)
	}
	if n.param >= 0 && seg != "" {
		t.collect(c, n.param, path, after)
	}
	if pos < len(path) {
		c.add(t, t.entries[n.ents+n.nend:n.ents+n.nend+n.nrest])
	}
}

func (c *collector) add(t *Table, entries []entry) {
	for _, e := range entries {
		if !e.any {
			c.mask |= e.mask
			if e.mask&overflowBit != 0 {
				c.extra = append(c.extra, e.route)
			}
		}
	}
}
