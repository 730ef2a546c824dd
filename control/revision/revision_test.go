package revision

import (
	"errors"
	"reflect"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

const base = `listeners: [{name: public, address: "127.0.0.1:0"}]
clusters:
  - {name: users, endpoints: [{address: "10.0.0.1:8080"}]}
  - {name: orders, endpoints: [{address: "10.0.0.2:8080"}]}
routes:
  - {id: get-user, host: api.example.com, methods: [GET], path_template: "/v1/users/{id}", upstream_cluster: users, timeout_ms: 100}
  - {id: list-orders, host: api.example.com, methods: [GET], path_template: "/v1/orders", upstream_cluster: orders, timeout_ms: 100}
`

const changed = `routing: {max_route_timeout_ms: 30000}
listeners: [{name: public, address: "127.0.0.1:0"}]
clusters:
  - {name: users, endpoints: [{address: "10.0.0.1:8080"}, {address: "10.0.0.3:8080"}]}
  - {name: carts, endpoints: [{address: "10.0.0.4:8080"}]}
routes:
  - {id: get-user, host: API.example.com, methods: [GET, HEAD], path_template: "/v1/users/{id}", upstream_cluster: users, timeout_ms: 250}
  - {id: get-cart, host: api.example.com, methods: [GET], path_template: "/v1/carts/{id}", upstream_cluster: carts, timeout_ms: 100}
`

func mustCheck(t *testing.T, y string) *snapshot.Config {
	t.Helper()
	c, err := Parse([]byte(y), "application/yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(c, snapshot.Version{Epoch: 1, Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDiff(t *testing.T) {
	d := Diff(mustCheck(t, base), mustCheck(t, changed))
	if !reflect.DeepEqual(d.Added, []string{"get-cart"}) || !reflect.DeepEqual(d.Removed, []string{"list-orders"}) {
		t.Fatalf("added %v removed %v", d.Added, d.Removed)
	}
	if len(d.Changed) != 1 || d.Changed[0].ID != "get-user" {
		t.Fatalf("changed %+v", d.Changed)
	}
	var fields []string
	for _, f := range d.Changed[0].Fields {
		fields = append(fields, f.Field)
	}
	// The host differs only in case: normalised, it is the same.
	if !reflect.DeepEqual(fields, []string{"methods", "timeout_ms"}) {
		t.Fatalf("changed fields %v", fields)
	}
	if f := d.Changed[0].Fields[1]; f.Old != float64(100) || f.New != float64(250) {
		t.Fatalf("timeout change %+v", f)
	}
	if !reflect.DeepEqual(d.Clusters.Added, []string{"carts"}) || !reflect.DeepEqual(d.Clusters.Removed, []string{"orders"}) ||
		!reflect.DeepEqual(d.Clusters.Changed, []string{"users"}) || !reflect.DeepEqual(d.Sections, []string{"routing"}) {
		t.Fatalf("clusters %+v sections %v", d.Clusters, d.Sections)
	}
	if d := Diff(mustCheck(t, base), mustCheck(t, base)); len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Sections) != 0 {
		t.Fatalf("diff of equal configs: %+v", d)
	}
}

func TestCheckListsEveryProblem(t *testing.T) {
	c, err := Parse([]byte(`listeners: []
routes:
  - {id: a, path_template: "/x", upstream_cluster: nope}
  - {id: a, path_template: "x", upstream_cluster: nope, timeout_ms: 5}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	err = Check(c, snapshot.Version{Epoch: 3, Sequence: 9})
	var ve *snapshot.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) < 5 {
		t.Fatalf("err = %v", err)
	}
	if got := Problems(err); !reflect.DeepEqual(got, ve.Problems) {
		t.Fatalf("Problems = %q", got)
	}
	if c.Version != (snapshot.Version{Epoch: 3, Sequence: 9}) {
		t.Fatalf("version %s not set", c.Version)
	}
}

func TestParseRejects(t *testing.T) {
	for _, c := range []struct{ body, ctype string }{
		{"", ""},
		{"unknown: 1", ""},
		{"routes: []\n---\nroutes: []\n", ""},
		{`{"routes": []`, "application/json"},
		{`routes: []`, "application/json"},
		{`{"routes": [], "routes": []}`, "application/json; charset=utf-8"},
	} {
		if _, err := Parse([]byte(c.body), c.ctype); err == nil {
			t.Errorf("Parse(%q, %q) accepted", c.body, c.ctype)
		}
	}
	if _, err := Parse([]byte(`{"routes": [], "listeners": []}`), "application/json"); err != nil {
		t.Errorf("JSON body: %v", err)
	}
}

// FuzzParse: the submission path (body → config → checks) never panics,
// and a config it accepts compiles and verifies.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base), "application/yaml")
	f.Add([]byte(changed), "")
	f.Add([]byte(`{"listeners":[{"name":"p","address":"127.0.0.1:0"}],"routes":[]}`), "application/json")
	f.Add([]byte("routes: [{id: x, path_template: \"/a/{b...}\"}]"), "text/yaml")
	priv, pub := testKeys(f)
	f.Fuzz(func(t *testing.T, body []byte, ctype string) {
		c, err := Parse(body, ctype)
		if err != nil {
			return
		}
		v := snapshot.Version{Epoch: 1, Sequence: 2}
		file, err := Build(c, v, priv, fixed)
		if err != nil {
			return
		}
		s, err := snapshot.Parse(file, pub)
		if err != nil || s.Version != v {
			t.Fatalf("built a snapshot that does not verify: %v", err)
		}
	})
}
