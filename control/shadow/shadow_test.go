package shadow

import (
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func cfg(t *testing.T, y string) *snapshot.Config {
	t.Helper()
	c, err := snapshot.ParseYAML([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	c.Version = snapshot.Version{Epoch: 1, Sequence: 1}
	snapshot.Normalize(c)
	if err := snapshot.Validate(c); err != nil {
		t.Fatal(err)
	}
	return c
}

const head = `listeners: [{name: p, address: "127.0.0.1:0"}]
clusters: [{name: u, endpoints: [{address: "10.0.0.1:80"}]}]
`

func TestCheck(t *testing.T) {
	old := cfg(t, head+`routes:
  - {id: user, host: api.example.com, methods: [GET], path_template: "/users/{id}", upstream_cluster: u, timeout_ms: 100}
  - {id: any, host: "*.example.net", path_template: "/x/{rest...}", upstream_cluster: u, timeout_ms: 100, idempotency: none}
`)
	// "me" shadows part of "user": GET /users/me moves to the new route.
	// "any" is unchanged and routes as before.
	new := cfg(t, head+`routes:
  - {id: user, host: api.example.com, methods: [GET], path_template: "/users/{id}", upstream_cluster: u, timeout_ms: 100}
  - {id: me, host: api.example.com, methods: [GET, PUT], path_template: "/users/me", upstream_cluster: u, timeout_ms: 100, idempotency: safe}
  - {id: any, host: "*.example.net", path_template: "/x/{rest...}", upstream_cluster: u, timeout_ms: 100, idempotency: none}
`)
	rep, err := Check(old, new, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Baseline != "r1" || rep.Requests == 0 || rep.Unexpected != 0 || rep.Differences != len(rep.Listed) {
		t.Fatalf("report %+v", rep)
	}
	got := map[string]string{}
	for _, d := range rep.Listed {
		if d.Host != "api.example.com" || d.Path != "/users/me" || !d.Expected {
			t.Errorf("unexpected difference %+v", d)
		}
		got[d.Method] = d.Old + "→" + d.New
	}
	if got["GET"] != "user→me" || got["PUT"] != "405→me" || len(got) != 2 {
		t.Fatalf("differences %v", got)
	}

	// A global change moves requests between unchanged routes: unexpected.
	dec := cfg(t, "routing: {encoded_slashes: decode}\n"+head+`routes:
  - {id: user, host: api.example.com, methods: [GET], path_template: "/users/{id}", upstream_cluster: u, timeout_ms: 100}
  - {id: any, host: "*.example.net", path_template: "/x/{rest...}", upstream_cluster: u, timeout_ms: 100, idempotency: none}
`)
	rep, err = Check(old, dec, "r1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unexpected == 0 || len(rep.Listed) > 3 || rep.Listed[0].Expected || !strings.Contains(rep.Listed[0].Path, "%2F") {
		t.Fatalf("report %+v", rep)
	}

	// No baseline: every request was a 404.
	rep, err = Check(nil, old, "", 1000)
	if err != nil || rep.Differences == 0 || rep.Unexpected != 0 {
		t.Fatalf("first revision: %+v %v", rep, err)
	}
}

func TestCorpus(t *testing.T) {
	c := cfg(t, head+`routes:
  - {id: a, host: "*", methods: [GET, PURGE], path_template: "/files/{path...}", upstream_cluster: u, timeout_ms: 100, request_class: write, idempotency: none}
  - {id: b, host: "*.svc.example", path_template: "/", upstream_cluster: u, timeout_ms: 100, idempotency: none}
`)
	seen := map[string]bool{}
	for _, r := range Corpus(c) {
		seen[r.Method+" "+r.Host+r.Path] = true
	}
	for _, want := range []string{
		"GET any-host.shadow.invalid/files/sample-path/more",
		"PURGE any-host.shadow.invalid/files/sample-path/more",
		"DELETE any-host.shadow.invalid/files/x%2Fpath/more",
		"OPTIONS shadow.svc.example/",
	} {
		if !seen[want] {
			t.Errorf("corpus lacks %q", want)
		}
	}
}

// A changed route that no longer serves what it served (a typo'd path:
// /items → /itmes) turns those requests into 404: unexpected, though the
// route changed. Removing a route on purpose stays expected.
func TestChangedRouteThatStopsServingIsUnexpected(t *testing.T) {
	route := func(id, path string) string {
		return "  - {id: " + id + ", host: shop.example.com, methods: [GET], path_template: \"" + path + "\", upstream_cluster: u, timeout_ms: 100}\n"
	}
	old := cfg(t, head+"routes:\n"+route("items", "/items")+route("carts", "/carts"))
	typo := cfg(t, head+"routes:\n"+route("items", "/itmes")+route("carts", "/carts"))
	rep, err := Check(old, typo, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	var lost, gained bool
	for _, d := range rep.Listed {
		switch {
		case d.Path == "/items" && d.Method == "GET":
			lost = d.Old == "items" && d.New == "404" && !d.Expected
		case d.Path == "/itmes" && d.Method == "GET":
			gained = d.Old == "404" && d.New == "items" && d.Expected
		}
	}
	if !lost || !gained || rep.Unexpected == 0 || rep.Listed[0].Expected {
		t.Fatalf("report %+v", rep)
	}
	removed := cfg(t, head+"routes:\n"+route("carts", "/carts"))
	rep, err = Check(old, removed, "r1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Differences == 0 || rep.Unexpected != 0 {
		t.Fatalf("removing a route: %+v", rep)
	}
}
