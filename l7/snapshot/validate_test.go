package snapshot

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

func loadTestConfig(t *testing.T, name string) *Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseYAML(data)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return c
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs.\n--- got ---\n%s\n--- want ---\n%s", name, got, want)
	}
}

func TestValidConfigCompiles(t *testing.T) {
	c := loadTestConfig(t, "valid.yaml")
	canon, err := Compile(c)
	if err != nil {
		t.Fatalf("valid.yaml: %v", err)
	}
	golden(t, "valid.canonical.json", string(canon)+"\n")
}

func TestInvalidConfigReportsEveryProblem(t *testing.T) {
	c := loadTestConfig(t, "invalid.yaml")
	_, err := Compile(c)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %v", err)
	}
	golden(t, "invalid.golden", err.Error()+"\n")
}

func TestCanonicalBytesIgnoreSourceOrder(t *testing.T) {
	a := loadTestConfig(t, "valid.yaml")
	b := loadTestConfig(t, "valid.yaml")
	for i, j := 0, len(b.Routes)-1; i < j; i, j = i+1, j-1 {
		b.Routes[i], b.Routes[j] = b.Routes[j], b.Routes[i]
	}
	b.Clusters[0], b.Clusters[1] = b.Clusters[1], b.Clusters[0]
	ca, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Compile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ca) != string(cb) {
		t.Error("reordering routes and clusters changed the canonical bytes")
	}
}

// byID finds a route of a normalised config (routes are sorted by id).
func byID(c *Config, id string) *Route {
	for i := range c.Routes {
		if c.Routes[i].ID == id {
			return &c.Routes[i]
		}
	}
	panic("no route " + id)
}

func TestValidationCases(t *testing.T) {
	base := func() *Config { return loadTestConfig(t, "valid.yaml") }
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string // a substring of the error; "" means valid
	}{
		{"valid as is", func(c *Config) {}, ""},
		{"same template, other param names, overlapping methods", func(c *Config) {
			r := *byID(c, "get-user")
			r.ID, r.PathTemplate, r.Methods, r.TrafficSplit = "get-user-2", "/v1/users/{uid}", []string{"HEAD"}, nil
			c.Routes = append(c.Routes, r)
		}, `routes "get-user" and "get-user-2" conflict: both match HEAD api.example.com/v1/users/{} with the same precedence`},
		{"same template, disjoint methods is fine", func(c *Config) {
			r := *byID(c, "get-user")
			r.ID, r.Methods, r.TrafficSplit, r.RequestClass, r.Idempotency, r.RetryPolicy = "delete-user", []string{"DELETE"}, nil, "", "none", nil
			c.Routes = append(c.Routes, r)
		}, ""},
		{"same template on another host is fine", func(c *Config) {
			r := *byID(c, "get-user")
			r.ID, r.Host = "other", "admin.example.com"
			c.Routes = append(c.Routes, r)
		}, ""},
		{"route without methods conflicts with any", func(c *Config) {
			r := *byID(c, "files")
			r.ID = "files-2"
			c.Routes = append(c.Routes, r)
		}, `routes "files" and "files-2" conflict: both match any method *.example.com/files/{...}`},
		{"timeout zero", func(c *Config) { byID(c, "get-user").TimeoutMs = 0 }, `route "get-user": timeout_ms is missing`},
		{"timeout negative", func(c *Config) { byID(c, "get-user").TimeoutMs = -5 }, `timeout_ms -5 must be between 1 and 60000`},
		{"timeout over a raised bound", func(c *Config) {
			c.Routing.MaxRouteTimeoutMs = 120000
			byID(c, "get-user").TimeoutMs = 120001
		}, `timeout_ms 120001 must be between 1 and 120000`},
		{"bound over the hard cap", func(c *Config) { c.Routing.MaxRouteTimeoutMs = HardMaxRouteTimeoutMs + 1 }, `max_route_timeout_ms`},
		{"weights under 100", func(c *Config) { byID(c, "get-user").TrafficSplit[1].Weight = 4 }, `weights sum to 99, not 100`},
		{"unknown revision", func(c *Config) { byID(c, "get-user").TrafficSplit[1].Revision = "users-v9" }, `unknown revision "users-v9"`},
		{"retries on a write with idempotency none", func(c *Config) { byID(c, "create-user").Idempotency = "none" }, `retries (max_attempts 3) on a write whose idempotency is none`},
		{"write without idempotency", func(c *Config) { byID(c, "create-user").Idempotency = "" }, `a write route must declare idempotency`},
		{"bad idempotency header", func(c *Config) { byID(c, "create-user").Idempotency = "key:Bad Header" }, `names an invalid header`},
		{"duplicate id", func(c *Config) { byID(c, "me").ID = "get-user" }, `route "get-user": duplicate id`},
		{"rest not last", func(c *Config) { byID(c, "files").PathTemplate = "/files/{p...}/x" }, `must be the last segment`},
		{"template with empty segment", func(c *Config) { byID(c, "me").PathTemplate = "/v1//me" }, `empty segment`},
		{"literal with encoded unreserved", func(c *Config) { byID(c, "me").PathTemplate = "/v1/%7Eme" }, `write it plainly`},
		{"too many params", func(c *Config) {
			byID(c, "me").PathTemplate = "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}"
		}, `at most 8`},
		{"epoch zero", func(c *Config) { c.Version.Epoch = 0 }, `epoch must be at least 1`},
		{"no listeners", func(c *Config) { c.Listeners = nil }, `at least one listener`},
		{"h2_server rampart", func(c *Config) { c.Listeners[0].H2Server = "rampart" }, ""},
		{"h2_server std", func(c *Config) { c.Listeners[0].H2Server = "std" }, ""},
		{"h2_server unknown", func(c *Config) { c.Listeners[0].H2Server = "nghttp2" }, `h2_server "nghttp2" must be std or rampart`},
		{"h2 without tls", func(c *Config) { c.Listeners[0].TLS = nil; c.Listeners[0].Protocols = []string{"h2"} }, `protocol h2 needs tls`},
		{"endpoint listed twice", func(c *Config) {
			c.Clusters[0].Endpoints = append(c.Clusters[0].Endpoints, c.Clusters[0].Endpoints[0])
		}, `endpoint 10.0.0.1:8080 is listed twice`},
		{"lower-case method", func(c *Config) { byID(c, "me").Methods = []string{"get"} }, `method "get" must be an upper-case token`},
		{"read route with POST", func(c *Config) { byID(c, "me").Methods = []string{"POST"}; byID(c, "me").RequestClass = "read" }, `request_class read cannot serve method POST`},
		{"unknown auth policy", func(c *Config) { byID(c, "me").AuthPolicyID = "jwt" }, `unknown auth_policy_id "jwt"`},
		{"bad host", func(c *Config) { byID(c, "me").Host = "api.*.example.com" }, `not allowed`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			Normalize(c)
			tc.mutate(c)
			Normalize(c)
			err := Validate(c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("want an error containing %q, got none", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want an error containing %q, got:\n%v", tc.want, err)
			}
		})
	}
}

func TestParseYAMLIsStrict(t *testing.T) {
	cases := map[string]string{
		"unknown key":        "version: {epoch: 1}\nroutez: []\n",
		"unknown route key":  "routes: [{id: a, pathh: /x}]\n",
		"two documents":      "version: {epoch: 1}\n---\nversion: {epoch: 2}\n",
		"wrong type":         "version: {epoch: one}\n",
		"duplicate key":      "version: {epoch: 1}\nversion: {epoch: 2}\n",
		"empty":              "",
		"not a mapping":      "- a\n- b\n",
		"tab indentation":    "version:\n\tepoch: 1\n",
		"negative sequence ": "version: {epoch: 1, sequence: -1}\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseYAML([]byte(src)); err == nil {
				t.Fatalf("ParseYAML(%q) succeeded, want an error", src)
			}
		})
	}
}

func FuzzParseYAML(f *testing.F) {
	for _, name := range []string{"valid.yaml", "invalid.yaml", "regional.yaml", "regional-invalid.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("version: {epoch: 1}\nroutes: [{id: a, path_template: '/{x...}'}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseYAML(data)
		if err != nil {
			return
		}
		canon, err := Compile(c)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Compile error is not a non-empty *ValidationError: %v", err)
			}
			return
		}
		// A config that compiles must compile again to the same bytes.
		again, err := Compile(c)
		if err != nil || string(again) != string(canon) {
			t.Fatalf("recompiling changed the result: %v", err)
		}
	})
}
