package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/server"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const (
	adminToken = "admin-token-0123456789"
	readToken  = "read-token-0123456789"
	nodeToken  = "node-token-0123456789"
)

// plane is a control plane running in process on loopback, with the
// embedded store.
type plane struct {
	url string
	dir string
}

func startPlane(t *testing.T) *plane {
	t.Helper()
	privPEM, _, err := snapshot.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := snapshot.ParsePrivateKey(privPEM)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
signing_key: unused-the-test-passes-the-key
allow_shared_node_tokens: true
tokens:
  - {name: ops, role: admin, sha256: %s}
  - {name: viewer, role: read, sha256: %s}
  - {name: nodes, role: node, sha256: %s}
storage: {type: embedded, dir: %q}
rollout:
  tick: 20ms
  node_timeout: 30s
  active_timeout: 1m
  bake: 0s
  stages:
    - {name: canary, cohort: canary}
    - {name: all}
`, api.HashToken(adminToken), api.HashToken(readToken), api.HashToken(nodeToken), dir)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.Open(cfg, server.Options{Key: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln, nil) }()
	t.Cleanup(func() { _ = s.Close() })
	p := &plane{url: "http://" + ln.Addr().String(), dir: t.TempDir()}
	eventually(t, "the plane to lead", func() bool { return s.Store.Leader().Leader })
	return p
}

// run runs a command as `rampart control ARGS...` would, with env
// RAMPART_SERVER and RAMPART_TOKEN set (token "" leaves it unset).
func (p *plane) run(t *testing.T, token string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{EnvServer: p.url, EnvToken: token}
	err := Main(args, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	return out.String(), err
}

// ok runs a command that must succeed.
func (p *plane) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.run(t, adminToken, args...)
	if err != nil {
		t.Fatalf("rampart control %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// report posts a node's status as its node client would.
func (p *plane) report(t *testing.T, st model.Status) {
	t.Helper()
	body, _ := json.Marshal(st)
	req, _ := http.NewRequest("POST", p.url+"/v1/node/status", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+nodeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("node report: %s", resp.Status)
	}
}

func (p *plane) file(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *plane) rollout(t *testing.T, id string) *Rollout {
	t.Helper()
	ro, err := (&Client{Server: p.url, Token: readToken}).Rollout(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ro
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30 s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// times and ages vary from run to run: their digits become N (the width,
// and so the table's alignment, stays).
var varying = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|\d+s ago|\d+-byte`)

func normalise(s string) string {
	return varying.ReplaceAllStringFunc(s, func(m string) string {
		return regexp.MustCompile(`\d`).ReplaceAllString(m, "N")
	})
}

// golden compares out (normalised) with testdata/name, or rewrites it
// with -update.
func golden(t *testing.T, name, out string) {
	t.Helper()
	out = normalise(out)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != out {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", name, out, want)
	}
}
