package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Header and query matchers route over HTTP/1.1 (l7/h1) and HTTP/2 alike:
// the field name in any case, repeated fields joined, the query decoded.
func TestMatchersRoute(t *testing.T) {
	v1, v2 := startUpstream(t, "v1", nil), startUpstream(t, "v2", nil)
	l := newLab(t)
	c := l.config()
	c.Clusters = []snapshot.Cluster{clusterOf("v1", v1.Addr()), clusterOf("v2", v2.Addr())}
	two := "2"
	fallback := getRoute("users", "/users/{id}", "v1")
	versioned := getRoute("users-v2", "/users/{id}", "v2")
	versioned.Match = &snapshot.RouteMatch{Headers: []snapshot.FieldMatch{{Name: "accept-version", Exact: &two}}}
	debug := getRoute("users-debug", "/users/{id}", "v2")
	debug.Match = &snapshot.RouteMatch{Headers: []snapshot.FieldMatch{{Name: "Accept-Version", Absent: true}},
		Query: []snapshot.FieldMatch{{Name: "debug mode", Exact: &two}}}
	c.Routes = []snapshot.Route{fallback, versioned, debug}
	l.apply(c)
	cases := []struct {
		name, query string
		header      [][2]string
		want        string // route id in the access log's place: the upstream's name
	}{
		{"no header", "", nil, "v1"},
		{"Accept-Version: 2", "", [][2]string{{"Accept-Version", "2"}}, "v2"},
		{"lower-case name", "", [][2]string{{"accept-version", "2"}}, "v2"},
		{"other version", "", [][2]string{{"Accept-Version", "3"}}, "v1"},
		{"two fields are 2, 2", "", [][2]string{{"Accept-Version", "2"}, {"Accept-Version", "2"}}, "v1"},
		{"query, decoded", "?debug+mode=%32", nil, "v2"},
		{"query with the header sent", "?debug+mode=2", [][2]string{{"Accept-Version", "1"}}, "v1"},
	}
	for _, proto := range []string{"h1", "h2"} {
		client := l.h1()
		if proto == "h2" {
			client = l.h2()
		}
		for _, tc := range cases {
			req, _ := http.NewRequest("GET", l.url("https", "/users/7"+tc.query), nil)
			for _, h := range tc.header {
				req.Header[h[0]] = append(req.Header[h[0]], h[1]) // as sent, not canonicalised by the client
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", proto, tc.name, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != tc.want {
				t.Errorf("%s %s: %d from %q, want 200 from %q", proto, tc.name, resp.StatusCode, resp.Header.Get("X-Upstream"), tc.want)
			}
		}
	}
}
