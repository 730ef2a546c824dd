package agent

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/bpf/netnstest"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/certgen"
	"github.com/rampart-edge/rampart/l7/daemon"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

const e2eEnv = "RAMPART_AGENT_E2E" // set in the child: "<client netns path>,<server interface>"

// TestEndToEnd builds a client and a server namespace joined by a veth pair
// and runs the rest of the test in a child process inside the server
// namespace (every thread of it there), where a real proxy (l7/daemon) and
// the agent run in-process.
func TestEndToEnd(t *testing.T) {
	if env := os.Getenv(e2eEnv); env != "" {
		clientNS, iface, _ := strings.Cut(env, ",")
		runE2E(t, clientNS, iface)
		return
	}
	needRoot(t)
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (iproute2, util-linux) is needed: %v", tool, err)
		}
	}
	c, s := netnstest.New(t, "ra"), netnstest.New(t, "ra")
	id := netnstest.Next()
	cif, sif := fmt.Sprintf("rac%d", id), fmt.Sprintf("ras%d", id)
	netnstest.Run(t, "ip", "link", "add", cif, "netns", c.Name, "type", "veth", "peer", "name", sif, "netns", s.Name)
	c.IP(t, "addr", "add", "192.0.2.1/24", "dev", cif)
	c.IP(t, "addr", "add", "192.0.2.3/24", "dev", cif)
	s.IP(t, "addr", "add", "192.0.2.2/24", "dev", sif)
	c.IP(t, "link", "set", cif, "up")
	s.IP(t, "link", "set", sif, "up")
	c.IP(t, "route", "add", "203.0.113.0/24", "via", "192.0.2.2")

	cmd := exec.Command("nsenter", "--net="+s.Path, os.Args[0], "-test.run=^TestEndToEnd$", "-test.v", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), e2eEnv+"="+c.Path+","+sif)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		t.Log(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the test in the server namespace failed: %v", err)
	}
	if o := netnstest.Run(t, "ip", "-n", s.Name, "link", "show", sif); strings.Contains(o, "xdp") {
		t.Fatalf("XDP left attached after teardown: %s", o)
	}
}

// e2e is the server side: proxy, agent, upstream, files.
type e2e struct {
	t                 *testing.T
	clientNS, iface   string
	priv              ed25519.PrivateKey
	pub               ed25519.PublicKey
	dir, snaps, denyF string
	upstream          string
	cert, key         string
	proxyAdmin        string
	cfg               Config

	agent  *Agent
	cancel context.CancelFunc
	done   chan error
	admin  string
}

func runE2E(t *testing.T, clientNS, iface string) {
	e := &e2e{t: t, clientNS: clientNS, iface: iface, dir: t.TempDir()}
	privPEM, pubPEM, _ := snapshot.GenerateKey()
	e.priv, _ = snapshot.ParsePrivateKey(privPEM)
	e.pub, _ = snapshot.ParsePublicKey(pubPEM)
	e.snaps, e.denyF = filepath.Join(e.dir, "snapshots"), filepath.Join(e.dir, "deny.json")
	if err := os.MkdirAll(e.snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := certgen.SelfSigned([]string{"vip.test"}, []net.IP{net.ParseIP("203.0.113.10")}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.cert, e.key = filepath.Join(e.dir, "cert.pem"), filepath.Join(e.dir, "key.pem")
	_ = os.WriteFile(e.cert, certPEM, 0o600)
	_ = os.WriteFile(e.key, keyPEM, 0o600)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "upstream says hi over %s", r.Header.Get("X-Forwarded-Proto"))
	}))
	t.Cleanup(up.Close)
	e.upstream = strings.TrimPrefix(up.URL, "http://")
	e.writeSnapshot(1, "203.0.113.10")

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pctx, stopProxy := context.WithCancel(context.Background())
	started := make(chan string, 1)
	proxyDone := make(chan error, 1)
	go func() {
		proxyDone <- daemon.Run(pctx, daemon.Config{SnapshotDir: e.snaps, StateDir: filepath.Join(e.dir, "proxy"),
			PublicKey: e.pub, AdminAddr: "127.0.0.1:0", Logger: quiet, DrainTimeout: time.Second,
			HandoffSocket: filepath.Join(e.dir, "handoff.sock"), DenyFile: e.denyF,
			Started: func(_ *proxy.Proxy, a net.Addr) { started <- a.String() }})
	}()
	t.Cleanup(func() { stopProxy(); <-proxyDone })
	select {
	case e.proxyAdmin = <-started:
	case err := <-proxyDone:
		t.Fatalf("proxy: %v", err)
	}

	ac, err := anycastConfig(t, e.dir, anycastYAML)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = Config{Interfaces: []string{iface}, XDPMode: bpf.XDPDriver, PinRoot: netnstest.PinRoot(t),
		Maps:        bpf.Options{MaxSources: 4096, MaxConnSources: 1024, MaxVIPs: 256, MaxSockets: 8},
		SnapshotDir: e.snaps, StateDir: filepath.Join(e.dir, "agent"), PublicKey: e.pub, DenyFile: e.denyF,
		HandoffSocket: filepath.Join(e.dir, "handoff.sock"), ProxyAdmin: e.proxyAdmin, AdminAddr: "127.0.0.1:0",
		VIPInterface: "rvip0", KeepVIPs: true, Anycast: ac,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	e.startAgent()
	t.Cleanup(e.teardown)
	e.cases()
}

const anycastYAML = `local_as: 65001
router_id: 198.51.100.1
site_id: 1
dry_run: no_bgp
sample_interval_ms: 100
drain: {time_ms: 1000}
damping: {hold_down_ms: 100}
inputs:
  - {name: proxy_ready, kind: bool, global: true, rise: 1, fall: 2}
  - {name: xdp, kind: bool, global: true, rise: 1, fall: 2}
  - {name: snapshot_fresh, kind: age, global: true, max_age_ms: 600000, rise: 1, fall: 2}
  - {name: upstreams, kind: share, global: true, rise: 1, fall: 2}
guard: {community_asn: 64512}
`

// anycastConfig writes body to a file and reads it back.
func anycastConfig(t testing.TB, dir, body string) (*anycast.Config, error) {
	p := filepath.Join(dir, "anycast.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return ReadAnycastConfig(p)
}

// writeSnapshot writes a signed snapshot that steers port 80 of each VIP to
// the loopback-bound http1 listener "web" and port 8443 to "quic" (TLS,
// http1 + h3 on the wildcard address, as h3 behind VIPs needs).
func (e *e2e) writeSnapshot(seq uint64, vips ...string) time.Time {
	e.t.Helper()
	c := &snapshot.Config{
		Version: snapshot.Version{Epoch: 1, Sequence: seq},
		Listeners: []snapshot.Listener{
			{Name: "web", Address: "127.0.0.1:0", Protocols: []string{"http1"}},
			{Name: "quic", Address: "0.0.0.0:8443", Protocols: []string{"http1", "h3"},
				TLS: &snapshot.TLS{Certificates: []snapshot.Certificate{{CertFile: e.cert, KeyFile: e.key}}}},
		},
		Clusters: []snapshot.Cluster{{Name: "up", Endpoints: []snapshot.Endpoint{{Address: e.upstream}}}},
		Routes: []snapshot.Route{{ID: "hello", Host: "*", Methods: []string{"GET"}, PathTemplate: "/hello",
			UpstreamCluster: "up", TimeoutMs: 2000}},
	}
	for _, v := range vips {
		c.L4.VIPs = append(c.L4.VIPs, snapshot.VIP{Address: v, Ports: []snapshot.VIPPort{{Port: 80, Listener: "web"}, {Port: 8443, Listener: "quic"}}})
	}
	data, err := snapshot.Build(c, e.priv, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(filepath.Join(e.snaps, fmt.Sprintf("%d.snap", seq)), data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return time.Now()
}

// writeDeny writes the deny channel's list: CIDR entries expiring after ttl.
func (e *e2e) writeDeny(seq uint64, ttl time.Duration, cidrs ...string) time.Time {
	e.t.Helper()
	var ents []deny.Entry
	for _, c := range cidrs {
		ents = append(ents, deny.Entry{Kind: deny.KindCIDR, Value: c, ExpiresAt: time.Now().Add(ttl), Reason: "test"})
	}
	data, err := deny.Build(ents, seq, e.priv, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(e.denyF, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return time.Now()
}

func (e *e2e) startAgent() {
	e.t.Helper()
	a, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	admin := make(chan string, 1)
	a.c.Started = func(x net.Addr) { admin <- x.String() }
	ctx, cancel := context.WithCancel(context.Background())
	e.agent, e.cancel, e.done = a, cancel, make(chan error, 1)
	go func() { e.done <- a.Run(ctx) }()
	select {
	case e.admin = <-admin:
	case err := <-e.done:
		e.t.Fatalf("agent: %v", err)
	}
	took := waitFor(e.t, 30*time.Second, "agent ready", func() bool { ok, _ := a.Ready(); return ok })
	e.t.Logf("agent ready %v after its admin listener came up", took.Round(time.Millisecond))
}

func (e *e2e) stopAgent() {
	e.t.Helper()
	if e.cancel == nil {
		return
	}
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("agent Run: %v", err)
	}
	e.cancel = nil
}

// teardown stops the agent and removes everything, as `rampart agent
// teardown` does; nothing may be left.
func (e *e2e) teardown() {
	e.stopAgent()
	if err := Teardown(e.cfg); err != nil {
		e.t.Errorf("Teardown: %v", err)
	}
	if _, err := os.Stat(e.cfg.PinRoot); !os.IsNotExist(err) {
		e.t.Errorf("pins left under %s: %v", e.cfg.PinRoot, err)
	}
	if out, _ := exec.Command("ip", "link", "show", "rvip0").CombinedOutput(); !strings.Contains(string(out), "does not exist") {
		e.t.Errorf("VIP interface left: %s", out)
	}
}
