package route

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

type builder struct {
	t        *Table
	routes   []snapshot.Route
	bits     map[string]uint64 // method -> bit
	problems []string
}

// item is one route's parsed template while its host group is built.
type item struct {
	segs  []snapshot.Segment
	route int32
	cond  bool // has matchers: sorts before the routes of its shape without
}

func (b *builder) fail(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// prepare checks route i and returns its template segments.
func (b *builder) prepare(i int32) (item, bool) {
	r := &b.routes[i]
	if !validHost(r.Host) {
		b.fail("route %q: host %q is not in normal form (lower-case name, *.name or *)", r.ID, r.Host)
		return item{}, false
	}
	tpl, err := snapshot.ParseTemplate(r.PathTemplate)
	if err != nil {
		b.fail("route %q: %v", r.ID, err)
		return item{}, false
	}
	for _, s := range tpl.Segments {
		if s.Kind == snapshot.Literal && s.Text != "" && !literalReachable(s.Text) {
			b.fail("route %q: path template %q: literal %q can never match a normalised path", r.ID, r.PathTemplate, s.Text)
			return item{}, false
		}
	}
	b.t.params[i] = tpl.Params()
	if r.Match != nil {
		cs, err := compileConds(r.Match)
		if err != nil {
			b.fail("route %q: match: %v", r.ID, err)
			return item{}, false
		}
		if b.t.conds == nil {
			b.t.conds = make([]conds, len(b.routes))
		}
		b.t.conds[i] = cs
	}
	return item{segs: tpl.Segments, route: i, cond: r.Match != nil}, true
}

func validHost(h string) bool {
	if h == "*" {
		return true
	}
	name := strings.TrimPrefix(h, "*.")
	return name != "" && !strings.Contains(name, "*") && NormalizeHost(name) == name &&
		name[len(name)-1] != '.'
}

// rank orders segment kinds at one depth the way build consumes them:
// templates ending here, literals, {param}, {rest...}.
func rank(segs []snapshot.Segment, depth int) int {
	if depth == len(segs) {
		return 0
	}
	return 1 + int(segs[depth].Kind)
}

// compareItems orders templates by shape (parameter names do not count), so
// that at every depth the templates sharing a trie node are contiguous and
// grouped by rank, literals in text order. Within one shape, routes with
// matchers come first (they are tried before the fallback without), then
// route order.
func compareItems(a, b item) int {
	for d := 0; ; d++ {
		ra, rb := rank(a.segs, d), rank(b.segs, d)
		if c := cmp.Compare(ra, rb); c != 0 {
			return c
		}
		if ra == 0 {
			if a.cond != b.cond {
				if a.cond {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.route, b.route)
		}
		if ra == 1 {
			if c := strings.Compare(a.segs[d].Text, b.segs[d].Text); c != 0 {
				return c
			}
		}
	}
}

// build lays out the trie node for items, which share their first depth
// segments, and returns its index.
func (b *builder) build(items []item, depth int) int32 {
	t := b.t
	idx := int32(len(t.nodes))
	t.nodes = append(t.nodes, node{param: -1})
	n := node{param: -1, ents: uint32(len(t.entries))}

	var byRank [4]int // byRank[r] is the first item of rank >= r
	for r := 1; r < len(byRank); r++ {
		i := byRank[r-1]
		for i < len(items) && rank(items[i].segs, depth) < r {
			i++
		}
		byRank[r] = i
	}
	ends, lits, params, rests := items[:byRank[1]], items[byRank[1]:byRank[2]],
		items[byRank[2]:byRank[3]], items[byRank[3]:]
	n.nend = uint32(b.addEntries(ends))
	n.nrest = uint32(b.addEntries(rests))

	// Literal children: one edge per run of equal text, reserved before the
	// children are built so that a node's edges stay contiguous.
	n.lits = uint32(len(t.edges))
	for i := 0; i < len(lits); {
		j := i + 1
		for j < len(lits) && lits[j].segs[depth].Text == lits[i].segs[depth].Text {
			j++
		}
		t.edges = append(t.edges, edge{text: lits[i].segs[depth].Text})
		i = j
	}
	n.nlits = uint32(len(t.edges)) - n.lits
	e := n.lits
	for i := 0; i < len(lits); e++ {
		j := i + 1
		for j < len(lits) && lits[j].segs[depth].Text == lits[i].segs[depth].Text {
			j++
		}
		t.edges[e].child = b.build(lits[i:j], depth+1)
		i = j
	}
	if len(params) > 0 {
		n.param = b.build(params, depth+1)
	}
	t.nodes[idx] = n
	return idx
}

// addEntries appends the routes of one template shape, reporting pairs
// whose methods overlap and whose matchers conflict (snapshot.MatchConflict):
// they would match one request with equal precedence.
func (b *builder) addEntries(items []item) int {
	start := len(b.t.entries)
	var union uint64
	anyBefore := false
	for _, it := range items {
		e := entry{route: it.route, any: len(b.routes[it.route].Methods) == 0, cond: it.cond}
		if !e.any {
			e.mask = b.mask(it.route)
		}
		if anyBefore || e.any && len(b.t.entries) > start || union&e.mask != 0 {
			b.reportConflict(start, it.route) // methods may overlap: compare pairs
		}
		union |= e.mask
		anyBefore = anyBefore || e.any
		b.t.entries = append(b.t.entries, e)
	}
	return len(b.t.entries) - start
}

func (b *builder) reportConflict(start int, route int32) {
	r := &b.routes[route]
	for _, prev := range b.t.entries[start:] {
		p := &b.routes[prev.route]
		if common := overlap(p.Methods, r.Methods); common != "" && snapshot.MatchConflict(p.Match, r.Match) {
			tpl, _ := snapshot.ParseTemplate(r.PathTemplate)
			b.fail("routes %q and %q conflict: both match %s %s%s with the same precedence",
				p.ID, r.ID, common, r.Host, tpl.Shape())
			return
		}
	}
}

// overlap returns the methods both lists accept, or "" when none.
func overlap(a, c []string) string {
	switch {
	case len(a) == 0 && len(c) == 0:
		return "any method"
	case len(a) == 0:
		return strings.Join(c, ",")
	case len(c) == 0:
		return strings.Join(a, ",")
	}
	var both []string
	for _, m := range a {
		for _, n := range c {
			if m == n {
				both = append(both, m)
			}
		}
	}
	return strings.Join(both, ",")
}

// mask assigns method bits in order of first use: 63 of them, after which
// methods share bit 63 and their routes keep their method lists.
func (b *builder) mask(route int32) uint64 {
	var m uint64
	for _, name := range b.routes[route].Methods {
		bit, ok := b.bits[name]
		if !ok {
			bit = overflowBit
			if len(b.t.methods) < 63 {
				bit = 1 << len(b.t.methods)
				b.t.methods = append(b.t.methods, name)
			} else {
				if b.t.overflow == nil {
					b.t.overflow, b.t.extra = map[string]bool{}, map[int32][]string{}
				}
				b.t.overflow[name] = true
			}
			b.bits[name] = bit
		}
		m |= bit
	}
	if m&overflowBit != 0 {
		b.t.extra[route] = b.routes[route].Methods
	}
	return m
}
