package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// capBits are the capability numbers of linux/capability.h the agent unit may name.
var capBits = map[string]uint{"CAP_NET_BIND_SERVICE": 10, "CAP_NET_ADMIN": 12, "CAP_SYS_ADMIN": 21,
	"CAP_SYS_RESOURCE": 24, "CAP_PERFMON": 38, "CAP_BPF": 39}

// unitValues returns the words of every KEY= line of a unit file, in order.
func unitValues(t *testing.T, unit, key string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "images", "systemd", unit))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var words []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			words = append(words, strings.Fields(v)...)
		}
	}
	return words
}

// agentCaps is the agent unit's capability set; bounding and ambient sets
// must be the same and exactly what agent/README.md says.
func agentCaps(t *testing.T) []string {
	t.Helper()
	bounding := unitValues(t, "rampart-agent.service", "CapabilityBoundingSet")
	ambient := unitValues(t, "rampart-agent.service", "AmbientCapabilities")
	slices.Sort(bounding)
	slices.Sort(ambient)
	if !slices.Equal(bounding, ambient) {
		t.Fatalf("rampart-agent.service: CapabilityBoundingSet %v differs from AmbientCapabilities %v", bounding, ambient)
	}
	if want := []string{"CAP_BPF", "CAP_NET_ADMIN", "CAP_PERFMON"}; !slices.Equal(bounding, want) {
		t.Fatalf("rampart-agent.service grants %v, want %v", bounding, want)
	}
	return bounding
}

// agentLab is a network namespace with a veth pair, a bpffs, a cgroup, a
// key and a signed snapshot with one VIP: what the agent needs to attach
// XDP, fill its maps and add the VIP.
type agentLab struct {
	ns, nsPath, iface, vipIface string
	bpffs, cgroup, dir, admin   string
}

const testVIP = "203.0.113.10"

func newAgentLab(t *testing.T) *agentLab {
	t.Helper()
	id := strconv.Itoa(os.Getpid() % 100000)
	l := &agentLab{ns: "rdebcap" + id, iface: "rdc" + id, vipIface: "rdv" + id, dir: t.TempDir(), admin: "127.0.0.1:9902"}
	l.nsPath = "/run/netns/" + l.ns
	runOK(t, "ip", "netns", "add", l.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", l.ns).Run() })
	runOK(t, "ip", "-n", l.ns, "link", "add", l.iface, "type", "veth", "peer", "name", l.iface+"p")
	runOK(t, "ip", "-n", l.ns, "addr", "add", "192.0.2.1/24", "dev", l.iface)
	for _, dev := range []string{"lo", l.iface, l.iface + "p"} {
		runOK(t, "ip", "-n", l.ns, "link", "set", dev, "up")
	}
	// The unit's ExecStartPre=+ mounts bpffs with full privileges; so does the test.
	l.bpffs = filepath.Join(l.dir, "bpffs")
	if err := os.Mkdir(l.bpffs, 0o700); err != nil {
		t.Fatal(err)
	}
	runOK(t, "mount", "-t", "bpf", "bpf", l.bpffs)
	t.Cleanup(func() { _ = syscall.Unmount(l.bpffs, syscall.MNT_DETACH) })
	l.cgroup = cgroup2Root(t) + "/rampart-debcap-" + id
	if err := os.Mkdir(l.cgroup, 0o755); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(l.cgroup) })
	for _, d := range []string{"snapshots", "state"} {
		if err := os.Mkdir(filepath.Join(l.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	runOK(t, rampartBin, "keygen", "-out", filepath.Join(l.dir, "snapshot"))
	cfg := fmt.Sprintf(`version: {epoch: 1, sequence: 1}
listeners:
  - {name: http, address: "127.0.0.1:18080", protocols: [http1]}
clusters:
  - {name: web, endpoints: [{address: "192.0.2.10:8080"}]}
routes:
  - {id: web, host: "*", methods: [GET], path_template: "/", upstream_cluster: web, timeout_ms: 1000}
l4:
  vips:
    - {address: %s, ports: [{port: 80, listener: http}]}
`, testVIP)
	cfgPath := filepath.Join(l.dir, "edge.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	runOK(t, rampartBin, "snapshot", "build", "-config", cfgPath, "-key", filepath.Join(l.dir, "snapshot.key"),
		"-out", filepath.Join(l.dir, "snapshots", "1.snap"))
	t.Cleanup(func() {
		// Detach and unpin whatever a run left (full privileges).
		_ = exec.Command("nsenter", append([]string{"--net=" + l.nsPath, rampartBin, "agent", "teardown"}, l.flags()...)...).Run()
	})
	return l
}

// cgroup2Root is where the cgroup2 hierarchy is mounted (unified or hybrid).
func cgroup2Root(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st syscall.Statfs_t
		if syscall.Statfs(p, &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
			return p
		}
	}
	t.Fatal("no cgroup2 hierarchy mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified")
	return ""
}

func (l *agentLab) flags() []string {
	return []string{"-interfaces", l.iface, "-pin-root", filepath.Join(l.bpffs, "rampart"), "-cgroup", l.cgroup,
		"-snapshot-dir", filepath.Join(l.dir, "snapshots"), "-state-dir", filepath.Join(l.dir, "state"),
		"-public-key", filepath.Join(l.dir, "snapshot.pub"), "-admin", l.admin, "-proxy-admin", "",
		"-vip-interface", l.vipIface, "-handoff-socket", filepath.Join(l.dir, "handoff.sock"), "-keep-vips"}
}

// agentRun is one agent process under a capability set.
type agentRun struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
}

// start runs the agent in the namespace the way the unit does: root,
// bounding = inheritable = ambient = caps, no new privileges, the noroot
// securebits, and RLIMIT_MEMLOCK at 64 KiB (no CAP_SYS_RESOURCE to raise it).
func (l *agentLab) start(t *testing.T, caps []string) *agentRun {
	t.Helper()
	set := "-all"
	for _, c := range caps {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
	}
	args := []string{"--net=" + l.nsPath, "prlimit", "--memlock=65536:65536",
		"setpriv", "--no-new-privs", "--securebits=+noroot,+noroot_locked",
		"--bounding-set=" + set, "--inh-caps=" + set, "--ambient-caps=" + set,
		rampartBin, "agent"}
	r := &agentRun{cmd: exec.Command("nsenter", append(args, l.flags()...)...), out: &bytes.Buffer{}, done: make(chan error, 1)}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start the agent: %v", err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// status asks the agent's admin listener inside the namespace.
func (l *agentLab) status() (map[string]any, error) {
	out, err := exec.Command("nsenter", "--net="+l.nsPath, rampartBin, "get", "-timeout", "5s", "http://"+l.admin+"/status").Output()
	if err != nil {
		return nil, fmt.Errorf("GET /status: %w", err)
	}
	var st map[string]any
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("GET /status: %w: %s", err, out)
	}
	return st, nil
}

func (l *agentLab) waitReady(t *testing.T, r *agentRun) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the agent exited before it was ready (%v):\n%s", err, r.out)
		default:
		}
		st, err := l.status()
		if err == nil && st["ready"] == true {
			return st
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprint(st["not_ready"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the agent was not ready within 60 s (last: %s):\n%s", last, r.out)
	return nil
}

func (r *agentRun) stop(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("the agent exited with %v on SIGTERM:\n%s", err, r.out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the agent did not exit within 60 s of SIGTERM:\n%s", r.out)
	}
}

// capEff reads the effective capability mask of a process.
func capEff(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("CapEff %q: %v", v, err)
			}
			return m
		}
	}
	t.Fatalf("no CapEff in /proc/%d/status", pid)
	return 0
}

func (l *agentLab) xdpAttached(t *testing.T) bool {
	return strings.Contains(runOK(t, "ip", "-n", l.ns, "link", "show", "dev", l.iface), "xdp")
}

// TestAgentCapabilitySet proves the agent unit's capability set suffices and
// that no smaller one does: under exactly CAP_BPF, CAP_NET_ADMIN and
// CAP_PERFMON (with RLIMIT_MEMLOCK at 64 KiB and no CAP_SYS_RESOURCE) the
// agent attaches XDP, fills its maps and adds the VIP; stopped, it leaves
// XDP attached and a new agent takes over; with any one capability fewer
// it refuses to start, naming it.
func TestAgentCapabilitySet(t *testing.T) {
	needRoot(t, "network namespaces, a bpffs mount and a cgroup for the agent")
	for tool, pkg := range map[string]string{"ip": "iproute2", "nsenter": "util-linux", "setpriv": "util-linux", "prlimit": "util-linux"} {
		need(t, tool, pkg)
	}
	caps := agentCaps(t)
	l := newAgentLab(t)

	r := l.start(t, caps)
	st := l.waitReady(t, r)
	var want uint64
	for _, c := range caps {
		want |= 1 << capBits[c]
	}
	if got := capEff(t, r.cmd.Process.Pid); got != want {
		t.Fatalf("the agent runs with CapEff %#x, want %#x (%v)", got, want, caps)
	}
	if !l.xdpAttached(t) {
		t.Fatalf("ready, but no XDP program on %s", l.iface)
	}
	if vips := fmt.Sprint(st["vips"]); !strings.Contains(vips, testVIP) {
		t.Fatalf("status lists VIPs %s, want %s", vips, testVIP)
	}
	if out := runOK(t, "ip", "-n", l.ns, "addr", "show", "dev", l.vipIface); !strings.Contains(out, testVIP+"/32") {
		t.Fatalf("VIP %s not on %s:\n%s", testVIP, l.vipIface, out)
	}
	maps, _ := st["bpf"].(map[string]any)["maps"].(map[string]any)
	if v4, _ := maps["vips_v4"].(map[string]any); v4 == nil || v4["entries"].(float64) < 1 {
		t.Fatalf("the vips_v4 map holds no entry: %v", maps["vips_v4"])
	}
	t.Logf("FIGURE agent ready under %v: CapEff %#x, XDP on %s, VIP %s on %s, vips_v4 entries %v",
		caps, want, l.iface, testVIP, l.vipIface, maps["vips_v4"].(map[string]any)["entries"])

	// An upgrade restarts the agent: in between, XDP stays attached (pinned
	// links) and the VIP stays up (-keep-vips, which the unit's ExecStart passes).
	r.stop(t)
	if !l.xdpAttached(t) {
		t.Fatalf("XDP detached from %s when the agent stopped:\n%s", l.iface, r.out)
	}
	if out := runOK(t, "ip", "-n", l.ns, "addr", "show", "dev", l.vipIface); !strings.Contains(out, testVIP) {
		t.Fatalf("VIP %s gone from %s when the agent stopped with -keep-vips:\n%s", testVIP, l.vipIface, out)
	}
	r2 := l.start(t, caps)
	l.waitReady(t, r2)
	if !l.xdpAttached(t) {
		t.Fatalf("the restarted agent is ready but XDP is not attached")
	}
	r2.stop(t)

	for _, drop := range caps {
		smaller := slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == drop })
		r := l.start(t, smaller)
		select {
		case err := <-r.done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("without %s the agent exited with %v, want a failure:\n%s", drop, err, r.out)
			}
			if !strings.Contains(r.out.String(), drop) {
				t.Errorf("without %s the agent failed without naming it:\n%s", drop, r.out)
			}
			t.Logf("FIGURE without %s: exit %d: %s", drop, ee.ExitCode(), strings.TrimSpace(lastLine(r.out.String())))
		case <-time.After(60 * time.Second):
			t.Fatalf("without %s the agent kept running for 60 s:\n%s", drop, r.out)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
