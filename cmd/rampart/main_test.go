package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The binary is built once for every test of this file.
var rampartBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rampart-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rampartBin = filepath.Join(dir, "rampart")
	out, err := exec.Command("go", "build", "-o", rampartBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build rampart: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv runs the binary with env added to this process's environment and
// returns its combined output and exit code.
func runEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(rampartBin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return string(out), code
}

// writeSnapshot makes, with the binary, a key pair dir/k and a snapshot
// signed with it at snap: version 1.1, listener web on listen, cluster app
// at upstream and one GET route id on path. It returns the key pair's base
// name (base+".pub" verifies the snapshot).
func writeSnapshot(t *testing.T, dir, snap, listen, upstream, id, path string, timeoutMs int) string {
	t.Helper()
	cfg := fmt.Sprintf(`version: {epoch: 1, sequence: 1}
listeners:
  - {name: web, address: %q}
clusters:
  - {name: app, endpoints: [{address: %q}]}
routes:
  - {id: %s, host: "*", methods: [GET], path_template: %q, upstream_cluster: app, timeout_ms: %d}
`, listen, upstream, id, path, timeoutMs)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k")
	if out, code := run(t, "keygen", "-out", key); code != 0 {
		t.Fatalf("keygen: %s", out)
	}
	if out, code := run(t, "snapshot", "build", "-config", cfgPath, "-key", key+".key", "-out", snap); code != 0 {
		t.Fatalf("snapshot build: %s", out)
	}
	return key
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestSnapshotBuildReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	if out, code := run(t, "keygen", "-out", filepath.Join(dir, "k")); code != 0 {
		t.Fatalf("keygen: %s", out)
	}
	out, code := run(t, "snapshot", "build", "-config", "../../l7/snapshot/testdata/invalid.yaml",
		"-key", filepath.Join(dir, "k.key"), "-out", filepath.Join(dir, "x.snap"))
	if code == 0 {
		t.Fatalf("invalid config built: %s", out)
	}
	golden, err := os.ReadFile("../../l7/snapshot/testdata/invalid.golden")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, strings.TrimSpace(string(golden))) {
		t.Fatalf("output does not list the problems of invalid.golden:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.snap")); !os.IsNotExist(err) {
		t.Fatal("a snapshot file was written for an invalid config")
	}
}

func TestKeygenRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	k := filepath.Join(dir, "k")
	if out, code := run(t, "keygen", "-out", k); code != 0 {
		t.Fatal(out)
	}
	if out, code := run(t, "keygen", "-out", k); code == 0 || !strings.Contains(out, "exists") {
		t.Fatalf("second keygen: %d %s", code, out)
	}
}

// A user's whole flow: keygen, build, verify, proxy, curl-like requests, a
// tampered file, SIGTERM.
func TestProxyFromTheBinary(t *testing.T) {
	dir := t.TempDir()
	snaps := filepath.Join(dir, "snapshots")
	if err := os.MkdirAll(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream, path %s", r.URL.Path)
	})}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go up.Serve(upLn)
	defer up.Close()
	listen, admin := freeAddr(t), freeAddr(t)
	snapPath := filepath.Join(dir, "1.snap")
	key := writeSnapshot(t, dir, snapPath, listen, upLn.Addr().String(), "hello", "/hello/{name}", 1000)
	out, code := run(t, "snapshot", "verify", "-pub", key+".pub", snapPath)
	if code != 0 || !strings.Contains(out, "rampart.snapshot.v2 version 1.1") || !strings.Contains(out, "digest ") {
		t.Fatalf("verify: %d %s", code, out)
	}
	data, _ := os.ReadFile(snapPath)
	tampered := filepath.Join(dir, "tampered.snap")
	_ = os.WriteFile(tampered, []byte(strings.Replace(string(data), `"timeout_ms":1000`, `"timeout_ms":1001`, 1)), 0o644)
	if out, code := run(t, "snapshot", "verify", "-pub", key+".pub", tampered); code == 0 || !strings.Contains(out, "digest mismatch") {
		t.Fatalf("verify tampered: %d %s", code, out)
	}
	if err := os.Rename(snapPath, filepath.Join(snaps, "1.snap")); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(rampartBin, "proxy", "-snapshot-dir", snaps, "-state-dir", filepath.Join(dir, "state"),
		"-public-key", key+".pub", "-admin", admin, "-access-log", filepath.Join(dir, "access.log"), "-drain-timeout", "5s")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs <- sc.Text()
		}
		close(logs)
	}()
	defer cmd.Process.Kill()
	waitHTTP(t, "http://"+admin+"/readyz", 200)
	resp, err := http.Get("http://" + listen + "/hello/world")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from upstream, path /hello/world" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// A tampered file in the directory is refused; the proxy keeps serving.
	if err := os.Rename(tampered, filepath.Join(snaps, "2.snap")); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, admin, `rampart_snapshot_rejected_total{reason="digest"} 1`)
	waitHTTP(t, "http://"+listen+"/hello/again", 200)
	st := get(t, "http://"+admin+"/status")
	if !strings.Contains(st, `"active_version": "1.1"`) {
		t.Fatalf("status: %s", st)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Read stderr to its end before Wait, which closes the pipe: waiting
	// first could drop the last lines (the drain line among them).
	var sawDrain bool
	deadline := time.After(30 * time.Second)
read:
	for {
		select {
		case l, ok := <-logs:
			if !ok {
				break read
			}
			if strings.Contains(l, `"msg":"draining"`) {
				sawDrain = true
			}
		case <-deadline:
			t.Fatal("liveness: the proxy did not stop within 30 s of SIGTERM")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy exited with %v", err)
	}
	if !sawDrain {
		t.Error("no drain log line")
	}
	al, _ := os.ReadFile(filepath.Join(dir, "access.log"))
	if !strings.Contains(string(al), `"path":"/hello/world"`) || !strings.Contains(string(al), `"route":"hello"`) {
		t.Errorf("access log: %s", al)
	}
}

// `rampart up`, as `make run` starts it: every curl it prints works.
func TestUpQuickstart(t *testing.T) {
	// The quickstart listens on fixed loopback ports: a second test suite
	// running beside this one (CI on a shared box) waits for its turn.
	lockFixedPorts(t)
	for _, a := range []string{"127.0.0.1:8443", "127.0.0.1:8080", "127.0.0.1:9081", "127.0.0.1:9082", "127.0.0.1:9901", "127.0.0.1:9080"} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("the quickstart needs %s, which is taken: %v", a, err)
		}
		ln.Close()
	}
	dir := t.TempDir()
	cmd := exec.Command(rampartBin, "up", "-dir", dir, "-access-log", "off")
	out, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var help strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		help.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Stop with Ctrl-C") {
			break
		}
	}
	go io.Copy(io.Discard, out)
	if !strings.Contains(help.String(), "curl") {
		t.Fatalf("no help printed:\n%s", help.String())
	}
	pem, err := os.ReadFile(filepath.Join(dir, "localhost.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	canary := 0
	for i := 0; i < 200; i++ {
		resp, err := client.Get(fmt.Sprintf("https://localhost:8443/v1/users/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
			t.Fatalf("%d %s %s", resp.StatusCode, resp.Proto, b)
		}
		if strings.Contains(string(b), `"revision": "canary"`) {
			canary++
		}
	}
	if canary < 15 || canary > 70 { // weight 20%: 40 ± 25 (over 4 sd)
		t.Errorf("canary answered %d of 200", canary)
	}
	// The versioned API of the help text: Accept-Version: 2 always reaches the canary's route.
	if !strings.Contains(help.String(), "http://127.0.0.1:9080/ui/") {
		t.Errorf("the help does not show the dashboard's address:\n%s", help.String())
	}
	if resp, err := http.Get("http://127.0.0.1:9080/ui/"); err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the dashboard at /ui/: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(help.String(), "Accept-Version: 2") {
		t.Errorf("the help does not show the Accept-Version example:\n%s", help.String())
	}
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://localhost:8443/v1/users/%d", i), nil)
		req.Header.Set("Accept-Version", "2")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"revision": "canary"`) {
			t.Fatalf("Accept-Version: 2: %d %s", resp.StatusCode, b)
		}
	}
	for path, want := range map[string]int{"/v1/users/42": 200, "/nowhere": 404, "/v1/orders/7": 502, "/v1/stats": 401} {
		resp, err := http.Get("http://localhost:8080" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	keyed, _ := http.NewRequest("GET", "http://localhost:8080/v1/stats", nil)
	keyed.Header.Set("X-Api-Key", "demo-key")
	if resp, err := http.DefaultClient.Do(keyed); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats with the demo key: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ := http.NewRequest("DELETE", "http://localhost:8080/v1/users/42", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("DELETE: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	// The HTTP/3 line the quickstart prints for a curl without HTTP/3.
	h3out, code := run(t, "get", "-http3", "-i", "-cacert", filepath.Join(dir, "localhost.crt"), "https://localhost:8443/v1/users/42")
	if code != 0 || !strings.HasPrefix(h3out, "HTTP/3.0 200") || !strings.Contains(h3out, `"path": "/v1/users/42"`) {
		t.Errorf("rampart get -http3: exit %d\n%s", code, h3out)
	}
	if !strings.Contains(help.String(), "rampart get -http3") {
		t.Errorf("the help does not show the HTTP/3 command:\n%s", help.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("rampart up exited with %v", err)
	}
}

func TestGetRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"get"},
		{"get", "http://127.0.0.1:1/", "extra"},
		{"get", "-cacert", "/nonexistent.pem", "https://127.0.0.1:1/"},
		{"get", "-H", "no-colon", "http://127.0.0.1:1/"},
		{"get", "http://127.0.0.1:1/"}, // nothing listens: a connection error, not a hang
	} {
		out, code := run(t, args...)
		if code == 0 {
			t.Errorf("rampart %v exited 0:\n%s", args, out)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitHTTP(t *testing.T, url string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never answered %d", url, code)
}

func waitMetric(t *testing.T, admin, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(get(t, "http://"+admin+"/metrics"), line) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("metric %q never appeared", line)
}

// lockFixedPorts holds an exclusive flock, across processes, until the test
// ends, so tests of concurrent suites that need the quickstart's fixed ports
// run one at a time.
func lockFixedPorts(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "rampart-quickstart-ports.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("flock %s: %v", f.Name(), err)
	}
	t.Cleanup(func() { _ = f.Close() })
}
