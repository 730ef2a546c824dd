package server_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/pgtest"
	"github.com/rampart-edge/rampart/control/server"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	adminToken = "admin-token-0123456789"
	readToken  = "read-token-0123456789"
	nodeToken  = "node-token-0123456789"
)

var testKey, testPub = func() (ed25519.PrivateKey, ed25519.PublicKey) {
	privPEM, pubPEM, err := snapshot.GenerateKey()
	if err != nil {
		panic(err)
	}
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	return priv, pub
}()

func logger() *slog.Logger {
	if os.Getenv("RAMPART_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// backend is where a test's control instances keep their state.
type backend struct {
	name string
	dir  string // embedded
	dsn  string // postgres
}

// forEachStore runs fn against the embedded store and against PostgreSQL.
func forEachStore(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Run("embedded", func(t *testing.T) { fn(t, backend{name: "embedded", dir: t.TempDir()}) })
	t.Run("postgres", func(t *testing.T) { fn(t, backend{name: "postgres", dsn: pgtest.DSN(t)}) })
}

// tuning is the rollout timing of a test.
type tuning struct {
	bake, activeTimeout, leaseTTL time.Duration
	tick                          time.Duration // engine tick; 0: 20ms
	nodeTimeout                   time.Duration // a node unheard of for longer is lost; 0: 5s
	extra                         string        // more YAML under rollout:
}

var fast = tuning{bake: 150 * time.Millisecond, activeTimeout: 15 * time.Second, leaseTTL: 2 * time.Second}

func (b backend) config(t *testing.T, tu tuning) *config.Config {
	t.Helper()
	if tu.tick == 0 {
		tu.tick = 20 * time.Millisecond
	}
	if tu.nodeTimeout == 0 {
		tu.nodeTimeout = 5 * time.Second
	}
	storage := fmt.Sprintf("storage: {type: embedded, dir: %q}", b.dir)
	if b.dsn != "" {
		storage = fmt.Sprintf("storage: {type: postgres, postgres: {dsn: %q, lease_ttl: %s}}", b.dsn, tu.leaseTTL)
	}
	y := fmt.Sprintf(`
signing_key: unused-the-test-passes-the-key
tokens:
  - {name: ops, role: admin, sha256: %s}
  - {name: viewer, role: read, sha256: %s}
  - {name: nodes, role: node, sha256: %s}   # shared: the harness nodes predate enrolment (tests of enrolment enrol their own)
allow_shared_node_tokens: true
%s
watch_timeout: 2s
rollout:
  tick: %s
  node_timeout: %s
  active_timeout: %s
  bake: %s
  stages:
    - {name: canary, cohort: canary}
    - {name: zone, zone: eu-1a}
    - {name: region, region: eu}
    - {name: all}
  health: {max_error_rate_increase: 0.05, min_requests: 20}
%s`, api.HashToken(adminToken), api.HashToken(readToken), api.HashToken(nodeToken), storage, tu.tick, tu.nodeTimeout, tu.activeTimeout, tu.bake, tu.extra)
	c, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, y)
	}
	return c
}

// instance is one running control plane.
type instance struct {
	srv  *server.Server
	url  string
	addr string
}

// start runs a control instance on addr ("" picks a port).
func start(t *testing.T, cfg *config.Config, addr string) *instance {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port of a stopped instance may take a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.Open(cfg, server.Options{Key: testKey, Logger: logger()})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln, nil) }()
	in := &instance{srv: s, url: "http://" + ln.Addr().String(), addr: ln.Addr().String()}
	t.Cleanup(func() { _ = s.Close() })
	return in
}

// waitReported waits (30 s at most) for the fleet view to list n nodes.
func (in *instance) waitReported(t *testing.T, n int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d nodes to report", n), func() bool {
		var fv struct{ Nodes []any }
		in.call(t, readToken, "GET", "/v1/fleet", "", nil, nil, &fv)
		return len(fv.Nodes) == n
	})
}

func (in *instance) waitLeader(t *testing.T, within time.Duration) {
	t.Helper()
	eventually(t, within, "instance to lead", func() bool { return in.srv.Store.Leader().Leader })
}

// call makes an API request and decodes a JSON answer into out (if set).
func (in *instance) call(t *testing.T, token, method, path, ctype string, body []byte, hdr map[string]string, out any) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, in.url+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %s: decode: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp
}

func bodyOf(r *http.Response) string { b, _ := io.ReadAll(r.Body); return string(b) }

// submit posts a YAML config and wants 201.
func (in *instance) submit(t *testing.T, yaml string) *model.Revision {
	t.Helper()
	var rev model.Revision
	r := in.call(t, adminToken, "POST", "/v1/revisions", "application/yaml", []byte(yaml), nil, &rev)
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.StatusCode, bodyOf(r))
	}
	return &rev
}

func (in *instance) rollout(t *testing.T, id string) *model.Rollout {
	t.Helper()
	var ro model.Rollout
	if r := in.call(t, readToken, "GET", "/v1/rollouts/"+id, "", nil, nil, &ro); r.StatusCode != 200 {
		t.Fatalf("rollout %s: %d %s", id, r.StatusCode, bodyOf(r))
	}
	return &ro
}

func (in *instance) waitRollout(t *testing.T, id string, within time.Duration, states ...string) *model.Rollout {
	t.Helper()
	var ro *model.Rollout
	eventually(t, within, "rollout "+id+" to be "+strings.Join(states, "/"), func() bool {
		ro = in.rollout(t, id)
		for _, s := range states {
			if ro.State == s {
				return true
			}
		}
		return false
	})
	return ro
}

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cfgYAML is a valid config: one listener, cluster "users" (and "extra"
// when n > 1), routes get-user and then route-2..route-n.
func cfgYAML(n int, timeoutMs int) string {
	var b strings.Builder
	b.WriteString(`listeners: [{name: public, address: "127.0.0.1:0"}]
clusters:
  - {name: users, endpoints: [{address: "10.0.0.1:8080"}]}
  - {name: extra, endpoints: [{address: "10.0.0.2:8080"}]}
routes:
`)
	fmt.Fprintf(&b, "  - {id: get-user, host: api.example.com, methods: [GET], path_template: \"/v1/users/{id}\", upstream_cluster: users, timeout_ms: %d}\n", timeoutMs)
	for i := 2; i <= n; i++ {
		fmt.Fprintf(&b, "  - {id: route-%d, host: api.example.com, methods: [GET], path_template: \"/v1/things%d/{id}\", upstream_cluster: extra, timeout_ms: 1000}\n", i, i)
	}
	return b.String()
}
