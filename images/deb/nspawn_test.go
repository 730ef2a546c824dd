package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// container is a booted systemd-nspawn machine of the base tree with the
// package installed.
type container struct {
	root string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	pid1 int // the container's systemd, as seen from the host
}

// exec runs a command inside every namespace of the container.
func (c *container) exec(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(c.pid1), "-a"}, args...)...).CombinedOutput()
	return string(out), err
}

func (c *container) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.exec(args...)
	if err != nil {
		t.Fatalf("in the container: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// net runs a host binary in the container's network namespace only.
func (c *container) net(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(c.pid1), "--net"}, args...)...).CombinedOutput()
	return string(out), err
}

func (c *container) mainPID(t *testing.T, unit string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(c.must(t, "systemctl", "show", "-p", "MainPID", "--value", unit)))
	if err != nil || n == 0 {
		t.Fatalf("%s has no main process (%v)", unit, err)
	}
	return n
}

// status reads a field of /proc/PID/status inside the container.
func (c *container) status(t *testing.T, pid int, field string) string {
	t.Helper()
	for _, line := range strings.Split(c.must(t, "cat", fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}

// waitActive polls until the units are active and the agent is ready.
func (c *container) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		out, err := c.exec("systemctl", "is-active", "rampart-agent.service", "rampart-proxy.service")
		if err == nil {
			r, _ := c.exec("rampart", "get", "-timeout", "2s", "http://127.0.0.1:9902/readyz")
			if strings.TrimSpace(r) == "ready" {
				return
			}
			last = "agent /readyz: " + r
		} else {
			last = out
		}
		time.Sleep(500 * time.Millisecond)
	}
	logs, _ := c.exec("journalctl", "--no-pager", "-n", "60", "-u", "rampart-agent", "-u", "rampart-proxy")
	t.Fatalf("agent and proxy not active and ready within 120 s (last: %s)\n%s", last, logs)
}

func bootContainer(t *testing.T) *container {
	t.Helper()
	base := baseTree(t)
	c := &container{root: filepath.Join(t.TempDir(), "root"), out: &bytes.Buffer{}}
	runOK(t, "cp", "-a", base, c.root)
	// Installed as an image build would: a chroot without /proc.
	runOK(t, "cp", debPath, debPath2, filepath.Join(c.root, "root"))
	in(t, c.root, "dpkg", "-i", "/root/"+filepath.Base(debPath))
	in(t, c.root, "rampart", "keygen", "-out", "/etc/rampart/snapshot")
	in(t, c.root, "rampart", "snapshot", "build", "-config", "/usr/share/doc/rampart/examples/edge.yaml",
		"-key", "/etc/rampart/snapshot.key", "-out", "/var/lib/rampart/snapshots/1.snap")
	in(t, c.root, "chown", "rampart-proxy:rampart", "/var/lib/rampart/snapshots/1.snap")
	env := filepath.Join(c.root, "etc/rampart/agent.env")
	b, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	// As an operator would: uncomment postinst's copy of the default and edit it.
	edited := bytes.Replace(b, []byte("\n#RAMPART_ARGS=-interfaces eth0"), []byte("\nRAMPART_ARGS=-interfaces host0"), 1)
	if bytes.Equal(edited, b) {
		t.Fatalf("%s has no commented-out default RAMPART_ARGS=-interfaces eth0 line:\n%s", env, b)
	}
	if err := os.WriteFile(env, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	// nspawn's /sys has no bpffs: bind one in (on a host, systemd mounts it).
	bpffs := filepath.Join(t.TempDir(), "bpffs")
	if err := os.Mkdir(bpffs, 0o700); err != nil {
		t.Fatal(err)
	}
	runOK(t, "mount", "-t", "bpf", "bpf", bpffs)
	t.Cleanup(func() { _ = syscall.Unmount(bpffs, syscall.MNT_DETACH) })
	// The container's bounding set must hold what the agent unit grants, and
	// nspawn's own seccomp filter must let bpf(2) through.
	name := fmt.Sprintf("rdebtest%d", os.Getpid()%100000)
	c.cmd = exec.Command("systemd-nspawn", "-b", "-D", c.root, "-M", name, "--register=no", "--keep-unit",
		"--network-veth", "--capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN", "--system-call-filter=bpf perf_event_open",
		"--bind="+bpffs+":/sys/fs/bpf", "--console=pipe")
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("systemd-nspawn: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM) // nspawn halts the machine
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for c.pid1 == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", c.cmd.Process.Pid, c.cmd.Process.Pid))
		// nspawn's first child is a short-lived helper that clones the
		// container's init and exits: take the child only once it is
		// systemd (nsenter into the helper failed once: its /proc entry
		// was gone).
		for _, pid := range strings.Fields(string(b)) {
			if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) == "systemd" {
				c.pid1, _ = strconv.Atoi(pid)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("systemd-nspawn exited (%v):\n%s", err, c.out)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if c.pid1 == 0 {
		t.Fatalf("no container init within 60 s:\n%s", c.out)
	}
	return c
}

// TestUnitsUnderSystemd boots the installed package under systemd
// (systemd-nspawn): the hardened agent and proxy units reach active, the
// agent attaches XDP with exactly its three capabilities, the proxy runs
// unprivileged with CAP_NET_BIND_SERVICE; an upgrade (dpkg -i of the next
// version) restarts both while XDP stays attached and the VIP stays up.
func TestUnitsUnderSystemd(t *testing.T) {
	needRoot(t, "systemd-nspawn, mounts, dpkg in a debootstrap tree")
	need(t, "systemd-nspawn", "systemd-container")
	need(t, "nsenter", "util-linux")
	need(t, "ip", "iproute2")
	c := bootContainer(t)
	c.waitReady(t)

	agent, proxy := c.mainPID(t, "rampart-agent.service"), c.mainPID(t, "rampart-proxy.service")
	if got := c.status(t, agent, "CapEff"); got != "000000c000001000" {
		t.Errorf("the agent runs with CapEff %s, want 000000c000001000 (CAP_BPF CAP_NET_ADMIN CAP_PERFMON)", got)
	}
	if got := c.status(t, agent, "NoNewPrivs"); got != "1" {
		t.Errorf("the agent runs with NoNewPrivs %s", got)
	}
	for pid, want := range map[int]string{agent: "rampart agent -keep-vips -interfaces host0",
		proxy: "rampart proxy -unready-delay 5s -drain-timeout 30s -handoff-socket"} {
		cmdline := strings.ReplaceAll(c.must(t, "cat", fmt.Sprintf("/proc/%d/cmdline", pid)), "\x00", " ")
		if !strings.Contains(cmdline, want) {
			t.Errorf("process %d runs %q, want it to contain %q", pid, cmdline, want)
		}
	}
	if env := c.must(t, "cat", fmt.Sprintf("/proc/%d/environ", proxy)); !strings.Contains(env, "GOMEMLIMIT=3600MiB") {
		t.Errorf("the proxy runs without GOMEMLIMIT=3600MiB from limits.conf")
	}
	if got := c.status(t, proxy, "CapEff"); got != "0000000000000400" {
		t.Errorf("the proxy runs with CapEff %s, want 0000000000000400 (CAP_NET_BIND_SERVICE)", got)
	}
	if uid := strings.Fields(c.status(t, proxy, "Uid")); len(uid) == 0 || uid[0] == "0" {
		t.Errorf("the proxy runs as uid %v", uid)
	}
	for _, u := range []string{"rampart-agent.service", "rampart-proxy.service"} {
		out, _ := c.exec("systemd-analyze", "security", "--no-pager", u)
		if m := exposure.FindStringSubmatch(out); m != nil {
			t.Logf("FIGURE systemd-analyze security %s (running, under nspawn): %s", u, m[2])
		}
	}
	if out, _ := c.net("ip", "link", "show", "host0"); !strings.Contains(out, "xdp") {
		t.Fatalf("no XDP on host0 with the agent ready:\n%s", out)
	}

	// The upgrade, watched from the container's network namespace, under load:
	// the sampler below and loaders more clients, each a new connection per
	// request to the VIP (steered by the agent to the proxy's socket).
	stop := make(chan struct{})
	const loaders = 3
	var loadOK, loadFailed atomic.Int64
	var loadWG sync.WaitGroup
	for range loaders {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.net(rampartBin, "get", "-timeout", "2s", "http://203.0.113.10/")
				if err == nil && strings.Contains(resp, "request id") {
					loadOK.Add(1)
				} else {
					loadFailed.Add(1)
				}
			}
		}()
	}
	type sample struct{ xdp, vip, served bool }
	samples := make(chan []sample, 1)
	go func() {
		var s []sample
		for {
			select {
			case <-stop:
				samples <- s
				return
			default:
			}
			link, _ := c.net("ip", "link", "show", "host0")
			addr, _ := c.net("ip", "-br", "addr", "show", "dev", "rampart0")
			resp, err := c.net(rampartBin, "get", "-timeout", "1s", "http://"+"203.0.113.10"+"/")
			s = append(s, sample{strings.Contains(link, "xdp"), strings.Contains(addr, "203.0.113.10"),
				err == nil && strings.Contains(resp, "request id")})
			time.Sleep(20 * time.Millisecond)
		}
	}()
	time.Sleep(time.Second)
	c.must(t, "dpkg", "-i", "/root/"+filepath.Base(debPath2))
	c.waitReady(t)
	// The proxy re-execs on reload: the PID serving changes once the new
	// one is ready, and the old one exits after its drain.
	deadline := time.Now().Add(60 * time.Second)
	for c.mainPID(t, "rampart-proxy.service") == proxy && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		if _, err := c.exec("kill", "-0", strconv.Itoa(proxy)); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	loadWG.Wait()
	got := <-samples
	var noXDP, noVIP, refused int
	for _, s := range got {
		if !s.xdp {
			noXDP++
		}
		if !s.vip {
			noVIP++
		}
		if !s.served {
			refused++
		}
	}
	t.Logf("FIGURE upgrade %s → %s under systemd: %d samples, XDP missing in %d, VIP missing in %d, request to the VIP not answered in %d (~20 ms apart)",
		testVersion, testVersion2, len(got), noXDP, noVIP, refused)
	t.Logf("FIGURE upgrade under load: %d requests to the VIP answered, %d unanswered (%d clients, a new connection each)",
		loadOK.Load()+int64(len(got)-refused), loadFailed.Load()+int64(refused), loaders+1)
	if len(got) < 10 || noXDP > 0 || noVIP > 0 {
		t.Errorf("the upgrade detached XDP or removed the VIP: %d of %d samples without XDP, %d without the VIP", noXDP, len(got), noVIP)
	}
	if refused > 0 || loadFailed.Load() > 0 || loadOK.Load() == 0 {
		logs, _ := c.exec("journalctl", "--no-pager", "-n", "40", "-u", "rampart-proxy")
		t.Errorf("requests to the VIP unanswered during the upgrade: %d of %d samples, %d of %d load requests\n%s",
			refused, len(got), loadFailed.Load(), loadOK.Load()+loadFailed.Load(), logs)
	}
	if out := c.must(t, "journalctl", "--no-pager", "-u", "rampart-proxy"); !strings.Contains(out, "upgrade: the new process is ready") {
		t.Errorf("the proxy was not upgraded in place (no upgrade log line):\n%s", out)
	}
	if a, p := c.mainPID(t, "rampart-agent.service"), c.mainPID(t, "rampart-proxy.service"); a == agent || p == proxy {
		t.Errorf("the upgrade did not restart the agent (%d → %d) and the proxy (%d → %d)", agent, a, proxy, p)
	}
	// Both packages carry the one test binary (stamped testVersion).
	if v := strings.TrimSpace(c.must(t, "dpkg-query", "-W", "-f", "${Version}", "rampart")); v != testVersion2 {
		t.Errorf("installed version after the upgrade: %q, want %s", v, testVersion2)
	}
	if v := c.must(t, "rampart", "version"); !strings.Contains(v, testVersion) {
		t.Errorf("rampart version after the upgrade: %s", v)
	}
}

// agentTrial restarts the agent with extra directives in a drop-in. Before
// the start it removes the VIP interface and sets IPv6's keep_addr_on_down
// defaults to 0, so what the re-created interface reads is the agent's own
// write. It reports whether the agent became ready (false once it failed
// and systemd restarted it) and that value.
func (c *container) agentTrial(t *testing.T, directives []string) (bool, string) {
	t.Helper()
	dropIn := "/run/systemd/system/rampart-agent.service.d/trial.conf"
	c.must(t, "mkdir", "-p", filepath.Dir(dropIn))
	c.must(t, "sh", "-c", "printf '%s\\n' \"$@\" > "+dropIn, "sh", "[Service]", strings.Join(directives, "\n"))
	c.must(t, "systemctl", "stop", "rampart-agent.service")
	// A fresh start: no pins, no VIP interface (teardown, with the container's privileges).
	c.must(t, "rampart", "agent", "teardown", "-interfaces", "host0")
	_, _ = c.net("ip", "link", "del", "rampart0")
	for _, f := range []string{"default", "all"} {
		if _, err := c.net("sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/"+f+"/keep_addr_on_down"); err != nil {
			t.Fatalf("reset keep_addr_on_down (%s): %v", f, err)
		}
	}
	c.must(t, "systemctl", "daemon-reload")
	c.must(t, "systemctl", "reset-failed", "rampart-agent.service")
	c.must(t, "systemctl", "start", "rampart-agent.service")
	ready := false
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, _ := c.exec("rampart", "get", "-timeout", "1s", "http://127.0.0.1:9902/readyz"); strings.TrimSpace(r) == "ready" {
			ready = true
			break
		}
		if n := strings.TrimSpace(c.must(t, "systemctl", "show", "-p", "NRestarts", "--value", "rampart-agent.service")); n != "0" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	keep, err := c.net("cat", "/proc/sys/net/ipv6/conf/rampart0/keep_addr_on_down")
	if err != nil {
		keep = "" // no VIP interface: the agent never got that far
	}
	c.must(t, "rm", "-f", dropIn)
	return ready, strings.TrimSpace(keep)
}

// TestAgentHardeningTrials tries, under systemd, the sandboxing directives
// the agent unit leaves out (and the exception it makes), to show why.
func TestAgentHardeningTrials(t *testing.T) {
	needRoot(t, "systemd-nspawn, mounts, dpkg in a debootstrap tree")
	need(t, "systemd-nspawn", "systemd-container")
	need(t, "nsenter", "util-linux")
	need(t, "ip", "iproute2")
	c := bootContainer(t)
	c.waitReady(t)
	for _, tr := range []struct {
		directives []string
		ready      bool
		keep       string // keep_addr_on_down of the re-created VIP interface
		why        string
	}{
		{nil, true, "1", "the unit as shipped"},
		{[]string{"ProtectKernelTunables=yes"}, false, "", "/sys/fs/bpf read-only: mkdir of the pin root fails"},
		{[]string{"ProtectKernelTunables=yes", "ReadWritePaths=-/proc/sys/net/ipv6/conf"}, false, "",
			"ReadWritePaths=/sys/fs/bpf does not undo it for bpffs"},
		{[]string{"ProcSubset=pid"}, true, "0", "ProcSubset=pid hides /proc/sys: the keep_addr_on_down write fails"},
		{[]string{"SystemCallFilter=~@privileged"}, false, "", "@privileged holds bpf(2)"},
		{[]string{"PrivateUsers=yes"}, false, "", "capabilities in a user namespace do not reach BPF"},
	} {
		ready, keep := c.agentTrial(t, tr.directives)
		t.Logf("FIGURE agent with %q: ready=%v keep_addr_on_down=%q (%s)", tr.directives, ready, keep, tr.why)
		if ready != tr.ready || (tr.ready && keep != tr.keep) {
			t.Errorf("agent with %q: ready=%v keep_addr_on_down=%q, want ready=%v %q (%s)", tr.directives, ready, keep, tr.ready, tr.keep, tr.why)
		}
	}
}
