package route

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Table is an immutable route matcher. It is safe for concurrent use.
//
// The segment tries of all host groups live in three flat arrays; nodes and
// entries hold no pointers, so a table of many routes costs the garbage
// collector little.
type Table struct {
	nodes   []node
	edges   []edge  // literal children, sorted by text within a node
	entries []entry // routes ending at a node, then routes with a rest parameter there

	exact   map[string]int32 // host -> root node
	wild    map[string]int32 // ".example.com" (for "*.example.com") -> root node
	maxWild int              // longest key of wild
	star    int32            // root node of the "*" group, or -1

	methods  []string           // method names by bit (at most 63)
	overflow map[string]bool    // further methods, which share bit 63
	extra    map[int32][]string // methods of routes that use bit 63
	params   [][]string         // parameter names per route
	conds    []conds            // matchers per route (match.go); nil when no route has any
}

type node struct {
	lits, nlits uint32 // t.edges[lits : lits+nlits]
	ents        uint32 // t.entries[ents : ents+nend] end here,
	nend, nrest uint32 // then nrest entries with a rest parameter here
	param       int32  // child for {param}, or -1
}

type edge struct {
	text  string
	child int32
}

type entry struct {
	mask  uint64 // methods accepted, by bit
	route int32
	any   bool // the route has no methods: it accepts all
	cond  bool // the route has header or query matchers: t.conds[route]
}

const overflowBit = 1 << 63

// Match is the result of Table.Lookup.
type Match struct {
	// Route indexes the slice given to NewTable; -1 when nothing matched.
	Route int32
	// Status is 200, 404 (no template matches the path) or 405 (some
	// template matches the path but no route accepts the method).
	Status int
	// Params[:NParams] are the captured values in template order; each is a
	// substring of the path.
	Params  [snapshot.MaxTemplateParams]string
	NParams int
}

// NewTable builds a Table from routes that have passed snapshot.Normalize and
// snapshot.Validate. Problems that remain (conflicting routes, templates that
// do not parse or cannot match, hosts not in normal form) are reported in one
// *snapshot.ValidationError naming the routes.
func NewTable(routes []snapshot.Route) (*Table, error) {
	if len(routes) > math.MaxInt32 {
		return nil, fmt.Errorf("route table: %d routes are too many", len(routes))
	}
	b := &builder{
		t: &Table{
			exact:  map[string]int32{},
			wild:   map[string]int32{},
			star:   -1,
			params: make([][]string, len(routes)),
		},
		routes: routes,
		bits:   map[string]uint64{},
	}
	groups := map[string][]item{}
	for i := range routes {
		if it, ok := b.prepare(int32(i)); ok {
			groups[routes[i].Host] = append(groups[routes[i].Host], it)
		}
	}
	hosts := make([]string, 0, len(groups))
	for h := range groups {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts) // deterministic layout and error order
	for _, h := range hosts {
		items := groups[h]
		slices.SortFunc(items, compareItems)
		root := b.build(items, 0)
		switch {
		case h == "*":
			b.t.star = root
		case strings.HasPrefix(h, "*."):
			b.t.wild[h[1:]] = root
			b.t.maxWild = max(b.t.maxWild, len(h)-1)
		default:
			b.t.exact[h] = root
		}
	}
	if len(b.problems) > 0 {
		return nil, &snapshot.ValidationError{Problems: b.problems}
	}
	return b.t, nil
}

// Len is the number of routes the table was built from.
func (t *Table) Len() int { return len(t.params) }

// ParamNames returns the parameter names of a route's template, in the order
// of Match.Params. The slice is shared: do not modify it.
func (t *Table) ParamNames(route int32) []string {
	if route < 0 || int(route) >= len(t.params) {
		return nil
	}
	return t.params[route]
}
