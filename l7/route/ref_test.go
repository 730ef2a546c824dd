package route

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// refLookup restates the matching rules plainly: pick the host group, try
// every route of it, and among those matching path and method take the one
// whose segment kinds are least (literal < param < rest), left to right.
func refLookup(routes []snapshot.Route, host, method, path string) (route int32, status int, params []string, allow []string) {
	group := refGroup(routes, host)
	route, status = -1, 404
	var best []snapshot.SegmentKind
	for _, i := range group {
		r := routes[i]
		tpl, err := snapshot.ParseTemplate(r.PathTemplate)
		if err != nil {
			panic(err)
		}
		ps, ok := refMatch(tpl, path)
		if !ok {
			continue
		}
		if status == 404 {
			status = 405
		}
		for _, m := range r.Methods {
			if !slices.Contains(allow, m) {
				allow = append(allow, m)
			}
		}
		if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
			continue
		}
		kinds := make([]snapshot.SegmentKind, len(tpl.Segments))
		for k, s := range tpl.Segments {
			kinds[k] = s.Kind
		}
		if route < 0 || slices.Compare(kinds, best) < 0 {
			route, status, params, best = i, 200, ps, kinds
		}
	}
	slices.Sort(allow)
	return route, status, params, allow
}

func refGroup(routes []snapshot.Route, host string) []int32 {
	var exact, star []int32
	wild := map[string][]int32{}
	for i, r := range routes {
		switch {
		case r.Host == "*":
			star = append(star, int32(i))
		case strings.HasPrefix(r.Host, "*."):
			wild[r.Host[1:]] = append(wild[r.Host[1:]], int32(i))
		case r.Host == host:
			exact = append(exact, int32(i))
		}
	}
	if exact != nil {
		return exact
	}
	bestLen, best := -1, []int32(nil)
	for suffix, g := range wild {
		if len(host) > len(suffix) && strings.HasSuffix(host, suffix) && len(suffix) > bestLen {
			bestLen, best = len(suffix), g
		}
	}
	if best != nil {
		return best
	}
	return star
}

func refMatch(tpl snapshot.Template, path string) ([]string, bool) {
	var segs []string
	if path != "/" {
		segs = strings.Split(path[1:], "/")
	}
	var params []string
	for k, s := range tpl.Segments {
		switch {
		case s.Kind == snapshot.Rest:
			rest := strings.Join(segs[min(k, len(segs)):], "/")
			if k >= len(segs) || rest == "" {
				return nil, false
			}
			return append(params, rest), true
		case k >= len(segs):
			return nil, false
		case s.Kind == snapshot.Param && segs[k] != "":
			params = append(params, segs[k])
		case s.Kind != snapshot.Literal || s.Text != segs[k]:
			return nil, false
		}
	}
	return params, len(segs) == len(tpl.Segments)
}

// randomRoutes builds a conflict-free random route set over a small
// alphabet, so that templates overlap a lot.
func randomRoutes(rnd *rand.Rand, n int) []snapshot.Route {
	hosts := []string{"*", "h.test", "*.test", "*.h.test"}
	segs := []string{"a", "b", "{p}", "{r...}"}
	methods := []string{"GET", "POST", "PUT"}
	used := map[string][]string{} // host+shape -> methods taken ("*" for any)
	var routes []snapshot.Route
	for len(routes) < n {
		var b strings.Builder
		np := 0
		for d := rnd.IntN(4); d >= 0; d-- {
			s := segs[rnd.IntN(len(segs))]
			if s[0] == '{' {
				if s == "{r...}" && d > 0 {
					s = "{p}"
				}
				s = strings.Replace(s, "p", fmt.Sprintf("p%d", np), 1)
				s = strings.Replace(s, "r", fmt.Sprintf("r%d", np), 1)
				np++
			}
			b.WriteString("/" + s)
		}
		if !strings.HasSuffix(b.String(), "...}") && rnd.IntN(4) == 0 {
			b.WriteString("/")
		}
		if rnd.IntN(10) == 0 {
			b.Reset()
			b.WriteString("/")
		}
		tpl, err := snapshot.ParseTemplate(b.String())
		if err != nil {
			panic(err)
		}
		host := hosts[rnd.IntN(len(hosts))]
		var ms []string
		for _, m := range methods {
			if rnd.IntN(2) == 0 {
				ms = append(ms, m)
			}
		}
		key := host + tpl.Shape()
		if taken := used[key]; slices.Contains(taken, "*") || len(ms) == 0 && len(taken) > 0 ||
			slices.ContainsFunc(ms, func(m string) bool { return slices.Contains(taken, m) }) {
			continue
		}
		if len(ms) == 0 {
			used[key] = []string{"*"}
		} else {
			used[key] = append(used[key], ms...)
		}
		routes = append(routes, rt(fmt.Sprintf("r%d", len(routes)), host, tpl.Raw, ms...))
	}
	return routes
}

func randomPath(rnd *rand.Rand) string {
	segs := []string{"a", "b", "c"}
	var b strings.Builder
	for d := rnd.IntN(5); d > 0; d-- {
		b.WriteString("/" + segs[rnd.IntN(len(segs))])
	}
	if b.Len() == 0 || rnd.IntN(4) == 0 {
		b.WriteString("/")
	}
	return b.String()
}

func checkAgainstRef(t *testing.T, table *Table, routes []snapshot.Route, host, method, path string) {
	t.Helper()
	var m Match
	table.Lookup(host, method, path, &m)
	route, status, params, allow := refLookup(routes, host, method, path)
	if m.Route != route || m.Status != status || !slices.Equal(m.Params[:m.NParams], params) && len(params)+m.NParams > 0 {
		t.Fatalf("%s %s%s: got route %d status %d params %q; reference says %d %d %q",
			method, host, path, m.Route, m.Status, m.Params[:m.NParams], route, status, params)
	}
	if status == 405 {
		if got := table.Allow(host, path); got != strings.Join(allow, ", ") {
			t.Fatalf("%s %s%s: Allow %q, reference %q", method, host, path, got, allow)
		}
	}
}

func TestLookupAgainstReference(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	hosts := []string{"h.test", "x.h.test", "y.test", "test", "other"}
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	for round := 0; round < 200; round++ {
		routes := randomRoutes(rnd, 1+rnd.IntN(30))
		table := mustTable(t, routes...)
		for q := 0; q < 200; q++ {
			checkAgainstRef(t, table, routes, hosts[rnd.IntN(len(hosts))], methods[rnd.IntN(len(methods))], randomPath(rnd))
		}
	}
}
