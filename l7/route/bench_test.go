package route

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/snapshot/snapgen"
)

type request struct {
	host, method, path string
	route              int32 // expected route, -1 for none
	status             int
}

// genRequests derives requests from the routes: hits on every kind of
// template, 405s (TRACE) and 404s (unknown paths and hosts), shuffled.
func genRequests(routes []snapshot.Route, n int) []request {
	rnd := rand.New(rand.NewPCG(7, 7))
	reqs := make([]request, 0, n)
	for len(reqs) < n {
		i := int32(rnd.IntN(len(routes)))
		r := routes[i]
		host := strings.Replace(r.Host, "*", "app", 1)
		if r.Host == "*" {
			host = "unknown.example"
		}
		var path strings.Builder
		tpl, _ := snapshot.ParseTemplate(r.PathTemplate)
		for _, s := range tpl.Segments {
			path.WriteByte('/')
			switch s.Kind {
			case snapshot.Literal:
				path.WriteString(s.Text)
			case snapshot.Param:
				fmt.Fprintf(&path, "%d", 1000+rnd.IntN(1e6))
			case snapshot.Rest:
				path.WriteString("css/site-2.css")
			}
		}
		method := "GET"
		if len(r.Methods) > 0 {
			method = r.Methods[rnd.IntN(len(r.Methods))]
		}
		switch k := rnd.IntN(10); {
		case k == 0:
			reqs = append(reqs, request{host, "GET", "/nope" + path.String(), -1, 404})
		case k == 1 && len(r.Methods) > 0:
			reqs = append(reqs, request{host, "TRACE", path.String(), -1, 405})
		case k == 2:
			reqs = append(reqs, request{"unknown.example.org", method, "/nope" + path.String(), -1, 404}) // the "*" group
		default:
			reqs = append(reqs, request{host, method, path.String(), i, 200})
		}
	}
	return reqs
}

var configs sync.Map // size -> *snapshot.Config

func generated(tb testing.TB, hosts, perHost int) *snapshot.Config {
	key := [2]int{hosts, perHost}
	if c, ok := configs.Load(key); ok {
		return c.(*snapshot.Config)
	}
	c := snapgen.Config(hosts, perHost)
	if err := snapshot.Validate(c); err != nil {
		tb.Fatalf("generated config does not validate: %v", err)
	}
	configs.Store(key, c)
	return c
}

func TestGeneratedConfig(t *testing.T) {
	c := generated(t, 200, 100)
	if n := len(c.Routes); n < 19_000 || n > 21_000 {
		t.Fatalf("generated %d routes, want about 20000", n)
	}
	table := mustTable(t, c.Routes...)
	var m Match
	for _, r := range genRequests(c.Routes, 20_000) {
		table.Lookup(r.host, r.method, r.path, &m)
		if m.Route != r.route || m.Status != r.status {
			t.Fatalf("%s %s%s: route %d status %d, want %d %d", r.method, r.host, r.path, m.Route, m.Status, r.route, r.status)
		}
	}
}

// BenchmarkLookup: a 20,000-route table (200 hosts × 100 routes);
// BenchmarkLookup300k the same over 300,000 (3,000 hosts × 100).
func BenchmarkLookup(b *testing.B)     { benchLookup(b, 200, 100) }
func BenchmarkLookup300k(b *testing.B) { benchLookup(b, 3000, 100) }

func benchLookup(b *testing.B, hosts, perHost int) {
	c := generated(b, hosts, perHost)
	table := mustTable(b, c.Routes...)
	reqs := genRequests(c.Routes, 4096)
	var m Match
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &reqs[i&4095]
		table.Lookup(r.host, r.method, r.path, &m)
	}
}

// BenchmarkRequest adds host and path normalisation to the lookup, as the
// proxy does per request.
func BenchmarkRequest(b *testing.B) {
	c := generated(b, 200, 100)
	table := mustTable(b, c.Routes...)
	reqs := genRequests(c.Routes, 4096)
	var m Match
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &reqs[i&4095]
		path, err := NormalizePath(r.path, RejectEncodedSlashes)
		if err != nil {
			b.Fatal(err)
		}
		table.Lookup(NormalizeHost(r.host), r.method, path, &m)
	}
}

func BenchmarkNormalizePath(b *testing.B) {
	for _, bc := range []struct{ name, path string }{
		{"normal", "/v1/users/12345/orders/67890"},
		{"rewrite", "/v1//users/./12345/%7eorders/../orders/67890"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := NormalizePath(bc.path, RejectEncodedSlashes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchNewTable(b *testing.B, hosts, perHost int) {
	c := generated(b, hosts, perHost)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewTable(c.Routes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(c.Routes)), "routes")
}

func BenchmarkNewTable20k(b *testing.B)  { benchNewTable(b, 200, 100) }
func BenchmarkNewTable300k(b *testing.B) { benchNewTable(b, 3000, 100) }

// benchMemory reports the heap a Table holds beyond the routes it was built
// from (literal texts are shared with the route templates).
func benchMemory(b *testing.B, hosts, perHost int) {
	c := generated(b, hosts, perHost)
	var before, after runtime.MemStats
	var total uint64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		runtime.ReadMemStats(&before)
		table, err := NewTable(c.Routes)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		total += after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(table)
	}
	b.ReportMetric(float64(total)/float64(b.N), "heap-bytes")
	b.ReportMetric(float64(total)/float64(b.N)/float64(len(c.Routes)), "bytes/route")
}

func BenchmarkTableMemory20k(b *testing.B)  { benchMemory(b, 200, 100) }
func BenchmarkTableMemory300k(b *testing.B) { benchMemory(b, 3000, 100) }

// withMatchers copies the generated routes and gives every ninth one a twin
// of the same host, template and methods that matches Accept-Version: 2
// (so 10 % of the routes have matchers); requests to a twinned route carry
// the header half of the time and then expect the twin.
func withMatchers(tb testing.TB) ([]snapshot.Route, []request, []Request) {
	c := generated(tb, 200, 100)
	routes := slices.Clone(c.Routes)
	twin := map[int32]int32{}
	v2 := "2"
	for i := range c.Routes {
		if i%9 == 0 {
			r := c.Routes[i]
			r.ID += "-v2"
			r.Match = &snapshot.RouteMatch{Headers: []snapshot.FieldMatch{{Name: "accept-version", Exact: &v2}}}
			twin[int32(i)] = int32(len(routes))
			routes = append(routes, r)
		}
	}
	reqs := genRequests(c.Routes, 4096)
	rqs := make([]Request, len(reqs))
	for i := range reqs {
		rqs[i].Header = map[string][]string{"Accept": {"*/*"}, "User-Agent": {"bench"}}
		if t, ok := twin[reqs[i].route]; ok && i%2 == 0 {
			rqs[i].Header["Accept-Version"] = []string{"2"}
			reqs[i].route = t
		}
	}
	return routes, reqs, rqs
}

func TestWithMatchers(t *testing.T) {
	routes, reqs, rqs := withMatchers(t)
	table := mustTable(t, routes...)
	var m Match
	for i, r := range reqs {
		table.LookupRequest(r.host, r.method, r.path, &rqs[i], &m)
		if m.Route != r.route || m.Status != r.status {
			t.Fatalf("%s %s%s %v: route %d status %d, want %d %d", r.method, r.host, r.path, rqs[i].Header, m.Route, m.Status, r.route, r.status)
		}
	}
}

// BenchmarkLookupMatchers: 22,889 routes, 10 % of them with a header
// matcher (twins of routes without), requests with three header fields.
func BenchmarkLookupMatchers(b *testing.B) {
	routes, reqs, rqs := withMatchers(b)
	table := mustTable(b, routes...)
	var m Match
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &reqs[i&4095]
		table.LookupRequest(r.host, r.method, r.path, &rqs[i&4095], &m)
	}
}

// BenchmarkLookupRequestNoMatchers is BenchmarkLookup through
// LookupRequest with header fields and a query: what the proxy pays on a
// table where no route has matchers.
func BenchmarkLookupRequestNoMatchers(b *testing.B) {
	c := generated(b, 200, 100)
	table := mustTable(b, c.Routes...)
	reqs := genRequests(c.Routes, 4096)
	rq := Request{Header: map[string][]string{"Accept": {"*/*"}, "Accept-Version": {"2"}}, Query: "a=1&b=2"}
	var m Match
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &reqs[i&4095]
		table.LookupRequest(r.host, r.method, r.path, &rq, &m)
	}
}
