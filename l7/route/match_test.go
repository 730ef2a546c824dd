package route

import (
	"net/url"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func ptr(s string) *string { return &s }

func hdr(name string, fm snapshot.FieldMatch) snapshot.FieldMatch { fm.Name = name; return fm }

func withMatch(r snapshot.Route, headers, query []snapshot.FieldMatch) snapshot.Route {
	r.Match = &snapshot.RouteMatch{Headers: headers, Query: query}
	return r
}

var matchRoutes = []snapshot.Route{
	// Declared before their matchers' twins on purpose: order never decides.
	rt("v1", "api.test", "/users/{id}", "GET"),
	withMatch(rt("v2", "api.test", "/users/{id}", "GET"), []snapshot.FieldMatch{hdr("accept-version", snapshot.FieldMatch{Exact: ptr("2")})}, nil),
	withMatch(rt("v3", "api.test", "/users/{id}", "GET"), []snapshot.FieldMatch{hdr("Accept-Version", snapshot.FieldMatch{Prefix: "3."})}, nil),
	withMatch(rt("beta", "api.test", "/users/{id}", "GET"), []snapshot.FieldMatch{
		hdr("Accept-Version", snapshot.FieldMatch{Absent: true}), hdr("X-Beta", snapshot.FieldMatch{Present: true})}, nil),
	withMatch(rt("debug", "api.test", "/users/{id}", "GET"), []snapshot.FieldMatch{hdr("accept-version", snapshot.FieldMatch{Exact: ptr("debug")})},
		[]snapshot.FieldMatch{{Name: "trace id", Regex: `[0-9a-f]{4}`}}),
	withMatch(rt("only-canary", "api.test", "/canary", "GET"), []snapshot.FieldMatch{hdr("Cookie", snapshot.FieldMatch{Regex: `.*\bcanary=1\b.*`})}, nil),
	withMatch(rt("only-post-q", "api.test", "/q", "POST"), nil, []snapshot.FieldMatch{{Name: "mode", Exact: ptr("a,b")}}),
	rt("lower", "api.test", "/{rest...}", "GET"),
}

func TestMatcherPrecedence(t *testing.T) {
	table := mustTable(t, matchRoutes...)
	cases := []struct {
		name, method, path string
		header             map[string][]string
		query              string
		want               string // route id, "404" or "405"
	}{
		{"no header: fallback", "GET", "/users/7", nil, "", "v1"},
		{"exact", "GET", "/users/7", map[string][]string{"Accept-Version": {"2"}}, "", "v2"},
		{"exact is exact", "GET", "/users/7", map[string][]string{"Accept-Version": {"20"}}, "", "v1"},
		{"prefix", "GET", "/users/7", map[string][]string{"Accept-Version": {"3.1"}}, "", "v3"},
		{"present and absent", "GET", "/users/7", map[string][]string{"X-Beta": {""}}, "", "beta"},
		{"absent fails", "GET", "/users/7", map[string][]string{"X-Beta": {"1"}, "Accept-Version": {"9"}}, "", "v1"},
		{"repeated fields are joined", "GET", "/users/7", map[string][]string{"Accept-Version": {"2", "2"}}, "", "v1"},
		{"header and query", "GET", "/users/7", map[string][]string{"Accept-Version": {"debug"}}, "x=1&trace+id=beef", "debug"},
		{"query escapes decoded", "GET", "/users/7", map[string][]string{"Accept-Version": {"debug"}}, "trace%20id=be%65f", "debug"},
		{"regex is anchored", "GET", "/users/7", map[string][]string{"Accept-Version": {"debug"}}, "trace+id=beef0", "v1"},
		{"cookie fields joined with ;", "GET", "/canary", map[string][]string{"Cookie": {"a=2", "canary=1"}}, "", "only-canary"},
		{"matchers fail, lower template", "GET", "/canary", map[string][]string{"Cookie": {"canary=0"}}, "", "lower"},
		{"repeated query joined with ,", "POST", "/q", nil, "mode=a&mode=b", "only-post-q"},
		{"matchers fail, no lower template: 404", "POST", "/q", nil, "mode=a", "404"},
		{"method fails: 405", "PUT", "/q", nil, "mode=a,b", "405"},
	}
	var m Match
	for _, c := range cases {
		table.LookupRequest("api.test", c.method, c.path, &Request{Header: c.header, Query: c.query}, &m)
		got := "404"
		switch {
		case m.Status == 200:
			got = matchRoutes[m.Route].ID
		case m.Status == 405:
			got = "405"
		}
		if got != c.want {
			t.Errorf("%s: %s %s?%s %v: got %s (status %d), want %s", c.name, c.method, c.path, c.query, c.header, got, m.Status, c.want)
		}
	}
	// Lookup without a request: no header fields, so only fallbacks match.
	table.Lookup("api.test", "GET", "/users/7", &m)
	if m.Status != 200 || matchRoutes[m.Route].ID != "v1" {
		t.Errorf("Lookup without a request: %+v", m)
	}
}

func TestMatcherConflicts(t *testing.T) {
	base := rt("a", "h", "/x/{id}", "GET", "POST")
	other := rt("b", "h", "/x/{other}", "POST")
	m := func(r snapshot.Route, hs ...snapshot.FieldMatch) snapshot.Route { return withMatch(r, hs, nil) }
	exact := func(name, v string) snapshot.FieldMatch { return snapshot.FieldMatch{Name: name, Exact: ptr(v)} }
	cases := []struct {
		name     string
		a, b     snapshot.Route
		conflict bool
	}{
		{"both without", base, other, true},
		{"one with matchers wins", m(base, exact("V", "1")), other, false},
		{"different exact values", m(base, exact("V", "1")), m(other, exact("v", "2")), false},
		{"same exact value", m(base, exact("V", "1")), m(other, exact("v", "1")), true},
		{"different fields may both be sent", m(base, exact("V", "1")), m(other, exact("W", "1")), true},
		{"exact outside prefix", m(base, exact("V", "1")), m(other, snapshot.FieldMatch{Name: "V", Prefix: "2"}), false},
		{"exact inside prefix", m(base, exact("V", "21")), m(other, snapshot.FieldMatch{Name: "V", Prefix: "2"}), true},
		{"nested prefixes", m(base, snapshot.FieldMatch{Name: "V", Prefix: "2."}), m(other, snapshot.FieldMatch{Name: "V", Prefix: "2"}), true},
		{"disjoint prefixes", m(base, snapshot.FieldMatch{Name: "V", Prefix: "1."}), m(other, snapshot.FieldMatch{Name: "V", Prefix: "2."}), false},
		{"present vs absent", m(base, snapshot.FieldMatch{Name: "V", Present: true}), m(other, snapshot.FieldMatch{Name: "V", Absent: true}), false},
		{"exact vs regex not matching", m(base, exact("V", "x")), m(other, snapshot.FieldMatch{Name: "V", Regex: `[0-9]+`}), false},
		{"exact vs regex matching", m(base, exact("V", "12")), m(other, snapshot.FieldMatch{Name: "V", Regex: `[0-9]+`}), true},
		{"two regexes: taken to overlap", m(base, snapshot.FieldMatch{Name: "V", Regex: `a`}), m(other, snapshot.FieldMatch{Name: "V", Regex: `b`}), true},
		{"methods disjoint", m(rt("a", "h", "/x/{id}", "GET"), exact("V", "1")), m(other, exact("V", "1")), false},
		{"one more test still overlaps", m(base, exact("V", "1"), exact("W", "1")), m(other, exact("V", "1")), true},
	}
	for _, c := range cases {
		_, err := NewTable([]snapshot.Route{c.a, c.b})
		cfgErr := snapshot.Validate(validConfig(c.a, c.b))
		if !c.conflict && (err != nil || cfgErr != nil) {
			t.Errorf("%s: NewTable: %v; Validate: %v", c.name, err, cfgErr)
		}
		for what, e := range map[string]error{"NewTable": err, "Validate": cfgErr} {
			got := e != nil && strings.Contains(e.Error(), `routes "a" and "b" conflict`)
			if got != c.conflict {
				t.Errorf("%s: %s: conflict %v, want %v (err %v)", c.name, what, got, c.conflict, e)
			}
		}
	}
}

// validConfig is a minimal config around routes a and b.
func validConfig(rs ...snapshot.Route) *snapshot.Config {
	c := &snapshot.Config{Version: snapshot.Version{Epoch: 1},
		Listeners: []snapshot.Listener{{Name: "l", Address: "127.0.0.1:8080", Protocols: []string{"http1"}}},
		Clusters:  []snapshot.Cluster{{Name: "c", Endpoints: []snapshot.Endpoint{{Address: "127.0.0.1:9000"}}}}}
	for _, r := range rs {
		r.UpstreamCluster, r.TimeoutMs, r.Idempotency = "c", 1000, "safe"
		c.Routes = append(c.Routes, r)
	}
	snapshot.Normalize(c)
	return c
}

func TestMatcherLookupDoesNotAllocate(t *testing.T) {
	table := mustTable(t, matchRoutes...)
	rq := &Request{Header: map[string][]string{"Accept-Version": {"3.2"}, "X-Beta": {"1"}}, Query: "a=b&trace+id=x"}
	var m Match
	for _, path := range []string{"/users/7", "/canary", "/other"} {
		if n := testing.AllocsPerRun(100, func() { table.LookupRequest("api.test", "GET", path, rq, &m) }); n != 0 {
			t.Errorf("%s: LookupRequest allocates %v times", path, n)
		}
	}
}

// FuzzQueryValue checks the query matcher's decoding against net/url on
// queries CheckQuery accepts and url.ParseQuery reads without error.
func FuzzQueryValue(f *testing.F) {
	for _, s := range []string{"a=1", "a=1&a=2", "a+b=%41", "a", "a=&b=1", "x=%2C&x=y"} {
		f.Add(s, "a")
	}
	f.Fuzz(func(t *testing.T, q, name string) {
		if name == "" || CheckQuery(q) != nil || strings.Contains(q, ";") { // names are never empty
			return
		}
		vals, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		got, ok := queryValue(q, name)
		want, wantOK := vals[name]
		if ok != wantOK || ok && got != strings.Join(want, ",") {
			t.Fatalf("queryValue(%q, %q) = %q, %v; net/url: %q", q, name, got, ok, want)
		}
	})
}
