package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
)

// proc is a rampart process of a test; its stderr lines are kept.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs []string
	done chan struct{}
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(rampartBin, args...), done: make(chan struct{})}
	stderr, _ := p.cmd.StderrPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs = append(p.logs, sc.Text())
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// stop sends SIGTERM and waits (SIGKILL after 10s).
func (p *proc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.cmd.Wait()
}

func (p *proc) count(s string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.logs {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// ctl runs `rampart control ARGS` as an operator would, with the server
// and token in the environment.
func ctl(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	return runEnv(t, env, append([]string{"control"}, args...)...)
}

func ctlJSON(t *testing.T, env []string, out any, args ...string) {
	t.Helper()
	s, code := ctl(t, env, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("rampart control %v: exit %d\n%s", args, code, s)
	}
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("rampart control %v -o json: %v\n%s", args, err, s)
	}
}

func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The user's flow with the binaries: a control plane (default 1 s tick,
// 5 min active timeout), a node enrolled with the CLI, a real proxy
// following it with its listener overridden on this node; a revision
// goes active; one whose certificate file is missing on the node is
// refused by the proxy and fails its stage at once with the reason (not
// after the active timeout); the fleet shows the refusal; the node shows
// the control plane unreachable once it stops, with one WARN line.
func TestControlCLIAndRefusalWithTheBinary(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if out, code := run(t, "keygen", "-out", key); code != 0 {
		t.Fatal(out)
	}
	const admin = "admin-token-for-the-binary-test"
	controlAddr := freeAddr(t)
	cfg := fmt.Sprintf(`listen: %s
signing_key: %s
tokens: [{name: ops, role: admin, sha256: %s}]
storage: {dir: %s}
rollout: {bake: 0s, stages: [{name: all}]}
`, controlAddr, key+".key", api.HashToken(admin), filepath.Join(dir, "control"))
	if err := os.WriteFile(filepath.Join(dir, "control.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	control := startProc(t, "control", "-config", filepath.Join(dir, "control.yaml"))
	waitHTTP(t, "http://"+controlAddr+"/healthz", 200)
	env := []string{"RAMPART_SERVER=http://" + controlAddr, "RAMPART_TOKEN=" + admin}

	if out, code := ctl(t, []string{"RAMPART_SERVER=http://" + controlAddr}, "revisions"); code == 0 || !strings.Contains(out, "no API token") {
		t.Fatalf("without a token: exit %d\n%s", code, out)
	}
	var enrolled struct{ Token string }
	ctlJSON(t, env, &enrolled, "nodes", "enroll", "edge-1")
	tokFile := filepath.Join(dir, "node.token")
	if err := os.WriteFile(tokFile, []byte(enrolled.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })}
	go func() { _ = up.Serve(upLn) }()
	defer up.Close()
	listen, adminAddr := freeAddr(t), freeAddr(t)
	proxy := startProc(t, "proxy", "-snapshot-dir", filepath.Join(dir, "snaps"), "-state-dir", filepath.Join(dir, "state"),
		"-public-key", key+".pub", "-admin", adminAddr, "-access-log", "off",
		"-control-url", "http://"+controlAddr, "-control-token-file", tokFile, "-node-id", "edge-1",
		"-listen-override", "web="+listen)
	waitHTTP(t, "http://"+adminAddr+"/healthz", 200)

	good := fmt.Sprintf(`listeners: [{name: web, address: "127.0.0.1:0"}]
clusters: [{name: app, endpoints: [{address: %q}]}]
routes: [{id: hello, host: "*", methods: [GET], path_template: /hello, upstream_cluster: app, timeout_ms: 1000}]
`, upLn.Addr().String())
	goodFile := filepath.Join(dir, "good.yaml")
	_ = os.WriteFile(goodFile, []byte(good), 0o644)
	var fleet struct {
		Nodes []struct {
			NodeID string `json:"node_id"`
		}
	}
	poll(t, 20*time.Second, "edge-1 in the fleet", func() bool { ctlJSON(t, env, &fleet, "fleet"); return len(fleet.Nodes) == 1 })
	start := time.Now()
	if out, code := ctl(t, env, "submit", "-f", goodFile, "-message", "hello"); code != 0 || !strings.Contains(out, "revision r1 created") {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	var ro struct{ State, Reason string }
	poll(t, 30*time.Second, "r1 done", func() bool {
		ctlJSON(t, env, &ro, "rollout", "status", "r1")
		return ro.State != "staging" && ro.State != "pending"
	})
	t.Logf("FIGURE binary: submit → rollout done on one real proxy (tick 1s, bake 0s): %s", time.Since(start).Round(time.Millisecond))
	if ro.State != "done" {
		t.Fatalf("r1: %+v", ro)
	}
	if body := get(t, "http://"+listen+"/hello"); body != "hello" {
		t.Fatalf("GET /hello on the overriding address: %q", body)
	}
	var st struct {
		Listeners []struct{ Name, Address, SnapshotAddress, Bound string } `json:"listeners"`
		Control   struct {
			State, URL string
			Failures   int
		}
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+adminAddr+"/status")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Listeners) != 1 || st.Listeners[0].Bound != listen || st.Control.State != "ok" {
		t.Fatalf("proxy /status: %+v", st)
	}
	// With -control-url and no -region-state, the control plane's region
	// state lands in <state-dir>/region-state.json and the proxy runs it.
	poll(t, 30*time.Second, "the proxy to run the control plane's region state", func() bool {
		var rs struct {
			RegionState *struct {
				File    string `json:"file"`
				Version string `json:"version"`
				Fresh   bool   `json:"fresh"`
			} `json:"region_state"`
		}
		_ = json.Unmarshal([]byte(get(t, "http://"+adminAddr+"/status")), &rs)
		return rs.RegionState != nil && rs.RegionState.Fresh && rs.RegionState.Version != "" &&
			rs.RegionState.File == filepath.Join(dir, "state", "region-state.json")
	})
	if out, code := run(t, "regionstate", "verify", "-key", key+".pub", filepath.Join(dir, "state", "region-state.json")); code != 0 {
		t.Fatalf("regionstate verify of the handed-over file: exit %d\n%s", code, out)
	}

	bad := strings.Replace(good, `address: "127.0.0.1:0"}]`, `address: "127.0.0.1:0"}, {name: tls, address: "127.0.0.1:0", tls: {certificates: [{cert_file: /nonexistent/rampart/api.pem, key_file: /nonexistent/rampart/api.key}]}}]`, 1)
	badFile := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(badFile, []byte(bad), 0o644)
	start = time.Now()
	if out, code := ctl(t, env, "submit", "-f", badFile); code != 0 {
		t.Fatalf("submit the revision with a missing certificate: exit %d\n%s", code, out)
	}
	poll(t, 60*time.Second, "r2 to fail (the active timeout is 5 min)", func() bool {
		ctlJSON(t, env, &ro, "rollout", "status", "r2")
		return ro.State != "staging" && ro.State != "pending"
	})
	t.Logf("FIGURE binary: submit → stage failed on the proxy's refusal: %s", time.Since(start).Round(time.Millisecond))
	if ro.State != "failed" || !strings.Contains(ro.Reason, "edge-1 refused") || !strings.Contains(ro.Reason, "/nonexistent/rampart/api.pem") {
		t.Fatalf("r2: %+v", ro)
	}
	if out, _ := ctl(t, env, "fleet"); !strings.Contains(out, "/nonexistent/rampart/api.pem") {
		t.Fatalf("fleet does not show the refusal:\n%s", out)
	}
	if out, _ := ctl(t, env, "rollout", "status", "r2"); !strings.Contains(out, "failed") || !strings.Contains(out, "refused") {
		t.Fatalf("rollout status r2:\n%s", out)
	}
	if body := get(t, "http://"+listen+"/hello"); body != "hello" {
		t.Fatalf("after the refusal: %q", body)
	}

	control.stop()
	poll(t, 30*time.Second, "the node to see the control plane unreachable", func() bool {
		_ = json.Unmarshal([]byte(get(t, "http://"+adminAddr+"/status")), &st)
		return st.Control.State == "unreachable"
	})
	// Retries go on: wait for three more failed requests, then count the WARN lines.
	failed := st.Control.Failures
	poll(t, 30*time.Second, "three more failed requests to the control plane", func() bool {
		_ = json.Unmarshal([]byte(get(t, "http://"+adminAddr+"/status")), &st)
		return st.Control.Failures >= failed+3
	})
	if n := proxy.count(`"msg":"control plane unreachable`); n != 1 {
		proxy.mu.Lock()
		defer proxy.mu.Unlock()
		t.Fatalf("%d WARN lines for one outage:\n%s", n, strings.Join(proxy.logs, "\n"))
	}
}
