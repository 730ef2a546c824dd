package route

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func rt(id, host, tpl string, methods ...string) snapshot.Route {
	return snapshot.Route{ID: id, Host: host, PathTemplate: tpl, Methods: methods}
}

func mustTable(t testing.TB, routes ...snapshot.Route) *Table {
	t.Helper()
	table, err := NewTable(routes)
	if err != nil {
		t.Fatalf("NewTable: %v", err)
	}
	return table
}

// precedenceRoutes exercises every rule; ids are unique so results can be
// named by id.
var precedenceRoutes = []snapshot.Route{
	rt("exact", "api.example.com", "/x"),
	rt("wild", "*.example.com", "/x"),
	rt("wild-long", "*.eu.example.com", "/x"),
	rt("star", "*", "/x"),
	rt("star-root", "*", "/"),
	rt("star-only-exact-group", "*", "/only-star"),

	rt("lit", "p.test", "/users/me", "GET"),
	rt("param", "p.test", "/users/{id}", "GET", "PUT"),
	rt("param-post", "p.test", "/users/{uid}", "POST"),
	rt("rest", "p.test", "/users/{path...}", "GET", "DELETE"),
	rt("lit-post-only", "p.test", "/orders/me", "POST"),
	rt("order", "p.test", "/orders/{id}", "GET"),
	rt("deep-lit", "p.test", "/a/{x}/c", "GET"),
	rt("deep-param", "p.test", "/a/b/{y}", "POST"),
	rt("two-params", "p.test", "/t/{a}/x/{b}", "GET"),
	rt("slash", "p.test", "/dir/", "GET"),
	rt("noslash", "p.test", "/dir", "GET"),
	rt("files", "p.test", "/files/{path...}", "GET"),
	rt("any", "p.test", "/any"),
	rt("only-put", "p.test", "/put", "PUT"),
}

func TestLookupPrecedence(t *testing.T) {
	table := mustTable(t, precedenceRoutes...)
	tests := []struct {
		name, host, method, path string
		want                     string   // route id, or "" for none
		status                   int      // 200, 404, 405
		params                   []string // captured values
		allow                    string   // Allow for 405
	}{
		{"exact host beats wildcard", "api.example.com", "GET", "/x", "exact", 200, nil, ""},
		{"wildcard", "a.example.com", "GET", "/x", "wild", 200, nil, ""},
		{"wildcard matches deeper names", "a.b.example.com", "GET", "/x", "wild", 200, nil, ""},
		{"longest wildcard wins", "a.eu.example.com", "GET", "/x", "wild-long", 200, nil, ""},
		{"wildcard needs a label", "example.com", "GET", "/x", "star", 200, nil, ""},
		{"star group", "other.test", "GET", "/x", "star", 200, nil, ""},
		{"star root", "other.test", "GET", "/", "star-root", 200, nil, ""},
		{"chosen group only: no fallback to star", "api.example.com", "GET", "/only-star", "", 404, nil, ""},
		{"literal over param", "p.test", "GET", "/users/me", "lit", 200, nil, ""},
		{"param over rest", "p.test", "GET", "/users/42", "param", 200, []string{"42"}, ""},
		{"rest for deeper paths", "p.test", "GET", "/users/42/x/", "rest", 200, []string{"42/x/"}, ""},
		{"backtrack: literal lacks method", "p.test", "PUT", "/users/me", "param", 200, []string{"me"}, ""},
		{"backtrack: same shape, other route", "p.test", "POST", "/users/me", "param-post", 200, []string{"me"}, ""},
		{"backtrack to rest", "p.test", "DELETE", "/users/me", "rest", 200, []string{"me"}, ""},
		{"backtrack to literal sibling", "p.test", "GET", "/orders/me", "order", 200, []string{"me"}, ""},
		{"backtrack across levels", "p.test", "GET", "/a/b/c", "deep-lit", 200, []string{"b"}, ""},
		{"earlier literal beats later literal", "p.test", "POST", "/a/b/c", "deep-param", 200, []string{"c"}, ""},
		{"405 when only the other branch matches", "p.test", "GET", "/a/b/d", "", 405, nil, "POST"},
		{"two params captured", "p.test", "GET", "/t/1/x/2", "two-params", 200, []string{"1", "2"}, ""},
		{"param needs a non-empty segment", "p.test", "GET", "/t/1/x/", "", 404, nil, ""},
		{"rest needs a segment", "p.test", "GET", "/files/", "", 404, nil, ""},
		{"rest needs the prefix segment", "p.test", "GET", "/files", "", 404, nil, ""},
		{"rest with one segment", "p.test", "GET", "/files/a", "files", 200, []string{"a"}, ""},
		{"rest keeps slashes", "p.test", "GET", "/files/a/b/c.css", "files", 200, []string{"a/b/c.css"}, ""},
		{"trailing slash template", "p.test", "GET", "/dir/", "slash", 200, nil, ""},
		{"no trailing slash template", "p.test", "GET", "/dir", "noslash", 200, nil, ""},
		{"trailing slash needs it exactly", "p.test", "GET", "/dir//", "", 404, nil, ""},
		{"root not in group", "p.test", "GET", "/", "", 404, nil, ""},
		{"empty method list accepts any", "p.test", "BREW", "/any", "any", 200, nil, ""},
		{"405 with allow", "p.test", "PATCH", "/users/me", "", 405, nil, "DELETE, GET, POST, PUT"},
		{"405 for a single route", "p.test", "GET", "/put", "", 405, nil, "PUT"},
		{"405 over two branches", "p.test", "PUT", "/a/b/c", "", 405, nil, "GET, POST"},
		{"404 unknown path", "p.test", "GET", "/nope", "", 404, nil, ""},
		{"unknown host falls to star", "p.test.other", "GET", "/x", "star", 200, nil, ""},
	}
	ids := map[string]int32{}
	for i, r := range precedenceRoutes {
		ids[r.ID] = int32(i)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m Match
			table.Lookup(tt.host, tt.method, tt.path, &m)
			want := int32(-1)
			if tt.want != "" {
				want = ids[tt.want]
			}
			if m.Status != tt.status || m.Route != want {
				t.Fatalf("Lookup(%s %s%s) = route %d status %d, want %q (%d) status %d",
					tt.method, tt.host, tt.path, m.Route, m.Status, tt.want, want, tt.status)
			}
			if got := m.Params[:m.NParams]; !slices.Equal(got, tt.params) && len(got)+len(tt.params) > 0 {
				t.Fatalf("params = %q, want %q", got, tt.params)
			}
			if m.Route >= 0 && len(table.ParamNames(m.Route)) != m.NParams {
				t.Fatalf("ParamNames(%d) = %q for %d params", m.Route, table.ParamNames(m.Route), m.NParams)
			}
			if m.Status == 405 {
				if got := table.Allow(tt.host, tt.path); got != tt.allow {
					t.Fatalf("Allow = %q, want %q", got, tt.allow)
				}
			}
		})
	}
	if got := table.ParamNames(ids["two-params"]); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ParamNames = %q", got)
	}
	if table.Len() != len(precedenceRoutes) {
		t.Fatalf("Len = %d", table.Len())
	}
}

func TestNoHostGroup(t *testing.T) {
	for _, table := range []*Table{mustTable(t, rt("a", "a.test", "/")), mustTable(t)} {
		var m Match
		table.Lookup("b.test", "GET", "/", &m)
		if m.Status != 404 || m.Route != -1 || table.Allow("b.test", "/") != "" {
			t.Fatalf("got %+v", m)
		}
	}
}

func TestNewTableErrors(t *testing.T) {
	tests := []struct {
		name   string
		routes []snapshot.Route
		want   []string // substrings of the error
	}{
		{"same shape, overlapping methods",
			[]snapshot.Route{rt("a", "h", "/u/{id}", "GET", "PUT"), rt("b", "h", "/u/{name}", "PUT")},
			[]string{`"a" and "b" conflict`, "PUT h/u/{}"}},
		{"same template, both any method",
			[]snapshot.Route{rt("a", "*", "/x"), rt("b", "*", "/x")},
			[]string{`"a" and "b" conflict`, "any method"}},
		{"any method against a list",
			[]snapshot.Route{rt("a", "*", "/f/{p...}", "GET"), rt("b", "*", "/f/{q...}")},
			[]string{`"a" and "b" conflict`}},
		{"unparsable template",
			[]snapshot.Route{rt("a", "*", "/x//y")},
			[]string{`route "a"`, "empty segment"}},
		{"unreachable literal",
			[]snapshot.Route{rt("a", "*", "/x%00")},
			[]string{`route "a"`, "%00 cannot appear in a path"}},
		{"host not normal",
			[]snapshot.Route{rt("a", "API.test", "/"), rt("b", "a.test:80", "/"), rt("c", "", "/"), rt("d", "a.*.test", "/")},
			[]string{`route "a": host`, `route "b": host`, `route "c": host`, `route "d": host`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTable(tt.routes)
			var ve *snapshot.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("NewTable error = %v, want a *snapshot.ValidationError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := NewTable([]snapshot.Route{rt("a", "h", "/u/{id}", "GET"), rt("b", "h", "/u/{id}", "POST")}); err != nil {
		t.Fatalf("disjoint methods on one shape: %v", err)
	}
}

func TestManyMethods(t *testing.T) {
	// More than 63 distinct methods: the rest share the overflow bit.
	var routes []snapshot.Route
	for i := 0; i < 70; i++ {
		m := "M" + strings.Repeat("X", i)
		routes = append(routes, rt(m, "*", "/m", m))
	}
	routes = append(routes, rt("other", "*", "/m/{x}", "M"+strings.Repeat("X", 66)))
	table := mustTable(t, routes...)
	for i := 0; i < 70; i++ {
		var m Match
		table.Lookup("h", routes[i].Methods[0], "/m", &m)
		if m.Route != int32(i) {
			t.Fatalf("method %d: route %d", i, m.Route)
		}
	}
	var m Match
	table.Lookup("h", "M"+strings.Repeat("X", 65), "/m/1", &m)
	if m.Status != 405 || table.Allow("h", "/m/1") != "M"+strings.Repeat("X", 66) {
		t.Fatalf("overflow method: %+v, allow %q", m, table.Allow("h", "/m/1"))
	}
	if _, err := NewTable(append(routes, rt("dup", "*", "/m", "M"+strings.Repeat("X", 68)))); err == nil {
		t.Fatal("overlapping overflow methods were not reported")
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	table := mustTable(t, precedenceRoutes...)
	cases := []struct{ name, host, method, path string }{
		{"hit literal", "p.test", "GET", "/users/me"},
		{"hit params", "p.test", "GET", "/t/1/x/2"},
		{"hit rest", "p.test", "GET", "/files/a/b/c.css"},
		{"hit wildcard", "a.eu.example.com", "GET", "/x"},
		{"404", "p.test", "GET", "/nope/x"},
		{"405", "p.test", "PATCH", "/users/me"},
	}
	var m Match
	for _, c := range cases {
		if n := testing.AllocsPerRun(100, func() { table.Lookup(c.host, c.method, c.path, &m) }); n != 0 {
			t.Errorf("%s: Lookup allocates %v times", c.name, n)
		}
	}
}
