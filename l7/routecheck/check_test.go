package routecheck

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

var update = flag.Bool("update", false, "rewrite golden files")

// now is when the tests take their decisions and the fixture is created.
var now = time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)

func read(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
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

func check(t *testing.T, casesFile string, s *regionstate.State) (string, int) {
	t.Helper()
	cfg, err := snapshot.ParseYAML(read(t, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases, err := ParseCases(read(t, casesFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, s, now)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(cases, now)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	failed, err := Write(&out, res)
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), failed
}

func TestCasesPass(t *testing.T) {
	s, err := LoadState("state.yaml", read(t, "state.yaml"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	out, failed := check(t, "cases.yaml", s)
	if failed != 0 {
		t.Errorf("%d cases failed:\n%s", failed, out)
	}
	golden(t, "cases.golden", out)
}

func TestFailoverCasesPass(t *testing.T) {
	s, err := LoadState("state-failover.yaml", read(t, "state-failover.yaml"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	out, failed := check(t, "cases-failover.yaml", s)
	if failed != 0 {
		t.Errorf("%d cases failed:\n%s", failed, out)
	}
	golden(t, "cases-failover.golden", out)
}

// The signed form of the same state gives the same table.
func TestSignedStateSameAsFixture(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := LoadState("state.yaml", read(t, "state.yaml"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	file, err := regionstate.Build(priv, fixture)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadState("state.json", file, pub, now)
	if err != nil {
		t.Fatal(err)
	}
	out, failed := check(t, "cases.yaml", s)
	if failed != 0 {
		t.Errorf("%d cases failed with the signed state:\n%s", failed, out)
	}
	if _, err := LoadState("state.json", file, nil, now); err == nil || !strings.Contains(err.Error(), "-key") {
		t.Errorf("a signed state without a key: %v, want an error asking for -key", err)
	}
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := LoadState("state.json", file, otherPub, now); err == nil {
		t.Error("a signed state verified against another key")
	}
}

func TestMismatchesFail(t *testing.T) {
	s, err := LoadState("state.yaml", read(t, "state.yaml"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	out, failed := check(t, "cases-mismatch.yaml", s)
	if failed != 2 {
		t.Errorf("%d cases failed, want 2:\n%s", failed, out)
	}
	golden(t, "cases-mismatch.golden", out)
}

// Without a region state every platform route fails closed.
func TestNoStateFailsClosed(t *testing.T) {
	out, failed := check(t, "cases-mismatch.yaml", nil)
	if failed != 3 || !strings.Contains(out, "503     state_unknown") {
		t.Errorf("without a state: %d failed, want 3 with state_unknown:\n%s", failed, out)
	}
}

func TestBadCases(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"no cases":       "cases: []\n",
		"unknown key":    "cases: [{name: a, host: h, path: /, expect: {route: r}, colour: red}]\n",
		"no name":        "cases: [{host: h, path: /, expect: {route: r}}]\n",
		"duplicate name": "cases: [{name: a, host: h, path: /, expect: {route: r}}, {name: a, host: h, path: /, expect: {route: r}}]\n",
		"no host":        "cases: [{name: a, path: /, expect: {route: r}}]\n",
		"relative path":  "cases: [{name: a, host: h, path: x, expect: {route: r}}]\n",
		"no route":       "cases: [{name: a, host: h, path: /}]\n",
		"bad reason":     "cases: [{name: a, host: h, path: /, expect: {route: r, reason: ok_maybe}}]\n",
		"two documents":  "cases: [{name: a, host: h, path: /, expect: {route: r}}]\n---\ncases: []\n",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseCases([]byte(src)); err == nil {
				t.Fatalf("ParseCases(%q) succeeded, want an error", src)
			}
		})
	}
	if _, err := ParseCases([]byte("cases: [{name: late, host: h, path: /, expect: {route: r, reason: nope}}]")); err == nil || !strings.Contains(err.Error(), `case "late"`) {
		t.Errorf("the error does not name the case: %v", err)
	}
}

// A request that cannot be built is bad input naming the case.
func TestBadRequestNamesTheCase(t *testing.T) {
	cfg, err := snapshot.ParseYAML(read(t, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run([]Case{{Name: "dots", Host: "api.example.com", Method: "GET", Path: "/a/%00", Expect: Expect{Route: "404"}}}, now)
	if err == nil || !strings.Contains(err.Error(), `case "dots"`) {
		t.Errorf("bad path: %v, want an error naming case \"dots\"", err)
	}
}

func FuzzParseCases(f *testing.F) {
	f.Add(read(f, "cases.yaml"))
	f.Add(read(f, "cases-mismatch.yaml"))
	f.Add(read(f, "cases-failover.yaml"))
	f.Add([]byte("cases: [{name: a, host: h, path: /, roll: 4294967295, expect: {route: r}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cases, err := ParseCases(data)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, c := range cases {
			if c.Name == "" || names[c.Name] || c.Method == "" || !strings.HasPrefix(c.Path, "/") || c.Expect.Route == "" {
				t.Fatalf("ParseCases accepted an invalid case %+v", c)
			}
			names[c.Name] = true
		}
	})
}
