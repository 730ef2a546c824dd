package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// upgradeProxy is a proxy started from a copy of the binary (so a test can
// replace the file the next re-exec runs), its admin and listener
// addresses, and its logs from every process of the chain (they share
// stderr).
type upgradeProxy struct {
	*proc
	bin, admin, listen string
}

// startUpgradeProxy writes a snapshot whose route goes to a local upstream
// that answers after a short pause (so requests are in flight when a
// process drains) and starts the proxy with extra flags.
func startUpgradeProxy(t *testing.T, extra ...string) *upgradeProxy {
	t.Helper()
	dir := t.TempDir()
	snaps := filepath.Join(dir, "snapshots")
	if err := os.MkdirAll(snaps, 0o755); err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		fmt.Fprint(w, "ok")
	})}
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = up.Serve(upLn) }()
	t.Cleanup(func() { _ = up.Close() })
	listen, admin := freeAddr(t), freeAddr(t)
	key := writeSnapshot(t, dir, filepath.Join(snaps, "1.snap"), listen, upLn.Addr().String(), "r", "/r/{n}", 5000)
	bin := filepath.Join(dir, "rampart")
	copyFile(t, rampartBin, bin)
	args := append([]string{"proxy", "-snapshot-dir", snaps, "-state-dir", filepath.Join(dir, "state"),
		"-public-key", key + ".pub", "-admin", admin, "-access-log", "off", "-drain-timeout", "5s",
		"-pid-file", filepath.Join(dir, "proxy.pid")}, extra...)
	p := &upgradeProxy{proc: startProcPath(t, bin, args...), bin: bin, admin: admin, listen: listen}
	t.Cleanup(p.stopChain)
	waitHTTP(t, "http://"+admin+"/readyz", 200)
	waitHTTP(t, "http://"+listen+"/r/1", 200)
	return p
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil { // as dpkg does: a new inode, never a half-written file
		t.Fatal(err)
	}
}

// status is the serving process's /status (any process of the chain that
// accepts the connection).
func (p *upgradeProxy) status(t *testing.T) (pid int, upgrade map[string]any) {
	t.Helper()
	var st struct {
		PID     int            `json:"pid"`
		Upgrade map[string]any `json:"upgrade"`
	}
	if err := json.Unmarshal([]byte(get(t, "http://"+p.admin+"/status")), &st); err != nil {
		t.Fatalf("status: %v", err)
	}
	return st.PID, st.Upgrade
}

// alive is whether pid runs (a zombie has exited: its sockets are closed).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// stopChain ends the process serving now and any still draining.
func (p *upgradeProxy) stopChain() {
	for range 3 {
		resp, err := http.Get("http://" + p.admin + "/status")
		if err != nil {
			break
		}
		var st struct {
			PID int `json:"pid"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if st.PID <= 0 {
			break
		}
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		for deadline := time.Now().Add(20 * time.Second); alive(st.PID) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(st.PID) {
			_ = syscall.Kill(st.PID, syscall.SIGKILL)
		}
	}
	p.proc.stop()
}

// startProcPath is startProc with another binary path.
func startProcPath(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	saved := rampartBin
	rampartBin = bin
	defer func() { rampartBin = saved }()
	return startProc(t, args...)
}

// load runs clients until stop: half open a new connection per request,
// half reuse keep-alive connections. Every error and non-200 is a failure.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLoad(url string, clients int) *load {
	l := &load{stop: make(chan struct{})}
	fresh := &http.Transport{DisableKeepAlives: true}
	kept := &http.Transport{MaxIdleConnsPerHost: clients}
	for i := range clients {
		tr := fresh
		if i%2 == 1 {
			tr = kept
		}
		c := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := c.Get(fmt.Sprintf("%s/r/%d", url, n))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.errs) < 10 {
						l.errs = append(l.errs, err.Error())
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
			}
		}()
	}
	return l
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// Under new-connection and keep-alive load, three SIGHUPs in a row each
// hand the sockets to a new process: no request fails, no connection is
// refused, and the serving PID changes every time.
func TestUpgradeUnderLoadLosesNothing(t *testing.T) {
	p := startUpgradeProxy(t)
	l := startLoad("http://"+p.listen, 32)
	seen := map[int]bool{}
	pid, _ := p.status(t)
	seen[pid] = true
	const upgrades = 3
	for i := 1; i <= upgrades; i++ {
		before := l.ok.Load()
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		old := pid
		poll(t, 20*time.Second, fmt.Sprintf("upgrade %d: a new PID on /status", i), func() bool {
			pid, _ = p.status(t)
			return pid != old
		})
		if seen[pid] {
			t.Fatalf("upgrade %d: PID %d served before", i, pid)
		}
		seen[pid] = true
		poll(t, 20*time.Second, fmt.Sprintf("upgrade %d: the old process %d exits after its drain", i, old), func() bool { return !alive(old) })
		poll(t, 20*time.Second, "requests served after the upgrade", func() bool { return l.ok.Load() > before+500 })
	}
	l.end()
	t.Logf("FIGURE upgrade under load: %d upgrades, %d requests ok, %d failed (32 clients, half keep-alive)", upgrades, l.ok.Load(), l.failed.Load())
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d requests failed across %d upgrades; first errors: %q", n, upgrades, l.errs)
	}
	if len(seen) != upgrades+1 {
		t.Fatalf("PIDs seen %v, want %d distinct", seen, upgrades+1)
	}
	if n := p.count(`"msg":"upgrade: the new process is ready; this one stops accepting and drains"`); n != upgrades {
		t.Errorf("%d upgrade-done log lines, want %d", n, upgrades)
	}
}

// A new binary that exits at once: the old process keeps serving, logs the
// failure with the binary's path, and a later SIGHUP with a good binary
// upgrades.
func TestUpgradeToABrokenBinaryKeepsTheOldServing(t *testing.T) {
	p := startUpgradeProxy(t)
	good, err := os.ReadFile(p.bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.bin+".new", []byte("#!/bin/sh\necho broken >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p.bin+".new", p.bin); err != nil {
		t.Fatal(err)
	}
	l := startLoad("http://"+p.listen, 8)
	pid, _ := p.status(t)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "the failed upgrade in /status", func() bool {
		_, u := p.status(t)
		return u["state"] == "failed"
	})
	if n := p.count(`"msg":"upgrade failed: this process keeps serving"`); n != 1 {
		t.Fatalf("%d upgrade-failed log lines, want 1", n)
	}
	if n := p.count(p.bin); n < 1 {
		t.Errorf("no log line names the binary %s", p.bin)
	}
	if now, _ := p.status(t); now != pid {
		t.Fatalf("PID changed to %d after a failed upgrade (was %d)", now, pid)
	}
	before := l.ok.Load()
	poll(t, 20*time.Second, "requests served after the failed upgrade", func() bool { return l.ok.Load() > before+50 })

	// The good binary back: the next SIGHUP upgrades.
	if err := os.WriteFile(p.bin+".new", good, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p.bin+".new", p.bin); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "a new PID after the good binary's upgrade", func() bool {
		now, _ := p.status(t)
		return now != pid
	})
	l.end()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d requests failed; first errors: %q", n, l.errs)
	}
}

// A new process that never becomes ready: a second SIGHUP meanwhile is
// refused with a log line, the first gives up after -upgrade-timeout, and
// the old keeps serving.
func TestUpgradeRefusesASecondSIGHUPAndTimesOut(t *testing.T) {
	p := startUpgradeProxy(t, "-upgrade-timeout", "3s")
	if err := os.WriteFile(p.bin+".new", []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p.bin+".new", p.bin); err != nil {
		t.Fatal(err)
	}
	pid, _ := p.status(t)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "the upgrade running", func() bool {
		_, u := p.status(t)
		return u["state"] == "running"
	})
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "the second SIGHUP refused", func() bool {
		return p.count(`"msg":"upgrade refused: one is already running"`) == 1
	})
	poll(t, 20*time.Second, "the upgrade timed out", func() bool {
		_, u := p.status(t)
		return u["state"] == "failed" && strings.Contains(fmt.Sprint(u["error"]), "timed out")
	})
	if now, _ := p.status(t); now != pid {
		t.Fatalf("PID changed to %d (was %d)", now, pid)
	}
	waitHTTP(t, "http://"+p.listen+"/r/2", 200)
}

// Bad -upgrade-timeout is refused at start.
func TestUpgradeTimeoutBounds(t *testing.T) {
	key := filepath.Join(t.TempDir(), "k")
	if out, code := run(t, "keygen", "-out", key); code != 0 {
		t.Fatal(out)
	}
	for _, v := range []string{"0s", "500ms", "11m0s"} {
		out, code := run(t, "proxy", "-public-key", key+".pub", "-snapshot-dir", "", "-upgrade-timeout", v)
		if code == 0 || !strings.Contains(out, "-upgrade-timeout "+v+": want 1s..10m") {
			t.Errorf("-upgrade-timeout %s: exit %d: %s", v, code, out)
		}
	}
}
