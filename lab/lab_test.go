package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast/birdtest"
	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// ciDrills run end to end in TestLab, in this order, when registered
// (flood and control-down come from their own files).
var ciDrills = []string{"failover", "drain", "flood", "control-down"}

// TestLab brings the lab up once (as root: namespaces, XDP, BIRD, the
// rampart binary built from this tree and run as processes), checks the
// topology, runs the CI drills, brings it up again over a "crashed" lab
// (processes killed, state left) and takes it down; nothing may be left.
func TestLab(t *testing.T) {
	netnstest.NeedRoot(t, "network namespaces, XDP, bpffs and cgroups for the lab")
	birdtest.Need(t)
	for _, tool := range []string{"ip", "nsenter", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (iproute2, util-linux, procps) is needed: %v", tool, err)
		}
	}
	bin := filepath.Join(t.TempDir(), "rampart")
	build := exec.Command("go", "build", "-o", bin, "../cmd/rampart")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/rampart: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "lab")
	prefix := fmt.Sprintf("rlt%d", os.Getpid())
	var out bytes.Buffer
	start := time.Now()
	l, err := Up(ctx, Options{Dir: dir, Binary: bin, Prefix: prefix, Out: &out})
	t.Log(out.String())
	if err != nil {
		logs(t, dir)
		_ = Down(dir)
		t.Fatalf("Up: %v", err)
	}
	t.Logf("FIGURE lab up: %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { downAndCheck(t, dir, prefix) })

	checkTopology(t, l)
	// A drill run as its own process finds the lab from the state file.
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Sites) != 4 || loaded.Router.Sock != l.Router.Sock || len(loaded.Procs) != len(l.Procs) {
		t.Fatalf("Load: %d sites, router %s, %d processes; Up had %d, %s, %d",
			len(loaded.Sites), loaded.Router.Sock, len(loaded.Procs), len(l.Sites), l.Router.Sock, len(l.Procs))
	}
	if out, err := l.Rampart(ctx, "/proc/self/ns/net", nil, "lab", "status", "-dir", dir); err != nil || !strings.Contains(out, "served by") {
		t.Fatalf("rampart lab status: %v\n%s", err, out)
	}

	registered := Drills()
	for _, name := range ciDrills {
		if !slices.Contains(registered, name) {
			t.Logf("drill %s is not in this tree yet; not run", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			var live bytes.Buffer
			r, err := RunDrill(ctx, loaded, name, &live)
			t.Log("\n" + live.String())
			t.Logf("FIGURE drill %s took %s", name, r.Took.Round(time.Millisecond))
			if err != nil {
				logs(t, dir)
				t.Fatalf("drill %s: %v", name, err)
			}
			checkDrill(t, name, r)
			// Each drill leaves the lab as it found it.
			if err := loaded.WaitConverged(ctx, 2*time.Minute); err != nil {
				t.Fatalf("after drill %s: %v", name, err)
			}
			for _, p := range loaded.Procs {
				if !p.Alive() {
					t.Errorf("after drill %s: %s (pid %d) is not running", name, p.Name, p.PID)
				}
			}
		})
		// Drills save new PIDs in the state file: read it again.
		if loaded, err = Load(dir); err != nil {
			t.Fatal(err)
		}
	}

	// A crash: every process killed, the state left behind; Up again in
	// the same dir removes the old lab first and comes up.
	old := loaded.Procs
	for _, p := range old {
		if err := p.kill(); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	start = time.Now()
	l2, err := Up(ctx, Options{Dir: dir, Binary: bin, Prefix: prefix, Out: &out})
	t.Log(out.String())
	if err != nil {
		logs(t, dir)
		t.Fatalf("Up over a crashed lab: %v", err)
	}
	t.Logf("FIGURE lab up over a crashed lab: %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out.String(), "removing it first") {
		t.Errorf("Up over a crashed lab did not say it removed it:\n%s", out.String())
	}
	checkTopology(t, l2)
}

// checkTopology asserts what Up promises: every site announces every VIP
// to the router, the router's FIB has an ECMP route over all four, the
// client reaches both VIPs, and requests spread over the sites.
func checkTopology(t *testing.T, l *Lab) {
	t.Helper()
	if len(l.Sites) != 4 || len(l.VIPs) < 2 {
		t.Fatalf("%d sites, VIPs %v", len(l.Sites), l.VIPs)
	}
	regions := map[string]int{}
	for _, s := range l.Sites {
		regions[s.Region]++
	}
	if len(regions) != 3 {
		t.Fatalf("regions %v, want three (one with two sites)", regions)
	}
	for _, v := range l.VIPs {
		serving, err := l.Router.Serving(v)
		if err != nil || len(serving) != 4 {
			t.Fatalf("%s served by %v (%v), want all four sites", v, serving, err)
		}
		fib, err := l.Router.KernelNexthops(v)
		if err != nil || strings.Count(fib, "nexthop via") != 4 {
			t.Fatalf("router FIB for %s: %v\n%s\nwant four next hops", v, err, fib)
		}
	}
	tr := l.StartTraffic(context.Background(), TrafficOptions{Rate: 100})
	if err := waitAllServed(context.Background(), l, tr); err != nil {
		tr.Stop()
		t.Fatal(err)
	}
	res := tr.Stop()
	if res.Lost() != 0 {
		t.Fatalf("%d of %d requests failed on a quiet lab: %s", res.Lost(), res.Requests(), res.FirstError())
	}
	for _, r := range res.Results {
		if r.Upstream == "" || l.Site(r.Upstream) == nil {
			t.Fatalf("an answer from no lab upstream: %+v", r)
		}
	}
	t.Logf("requests by site on a quiet lab: %s", fmtCounts(res.BySite(time.Time{}, time.Time{})))
}

// checkDrill asserts the counts and states a drill reports.
func checkDrill(t *testing.T, name string, r *Report) {
	t.Helper()
	switch name {
	case "drain":
		if failed := r.Value("requests failed"); failed != 0 {
			t.Errorf("drain: %v requests failed, want 0", failed)
		}
		if s, _ := r.Value("served after the withdrawal, by site").(string); strings.Contains(s, DrainSite+"=") || s == "none" {
			t.Errorf("drain: served after the withdrawal: %s", s)
		}
	case "failover":
		for _, phase := range []string{"stop", "crash"} {
			if lost := r.Value(phase + ": requests lost"); lost != 0 {
				t.Errorf("failover %s: %v requests lost, want 0 with a retrying client", phase, lost)
			}
			if n, _ := r.Value(phase + ": requests").(int); n == 0 {
				t.Errorf("failover %s: no requests made", phase)
			}
			if s, _ := r.Value(phase + ": served after the withdrawal, by site").(string); strings.Contains(s, FailoverSite+"=") || s == "none" {
				t.Errorf("failover %s: served after the withdrawal: %s", phase, s)
			}
		}
	}
}

// logs prints the tail of every log of the lab, for a failure.
func logs(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	more, _ := filepath.Glob(filepath.Join(dir, "sites", "*", "*.log"))
	for _, f := range append(files, more...) {
		t.Logf("--- %s:\n%s", f, tail(f, 3000))
	}
}

// downAndCheck takes the lab down and asserts nothing it made is left.
func downAndCheck(t *testing.T, dir, prefix string) {
	l, loadErr := Load(dir)
	if err := Down(dir); err != nil {
		t.Errorf("Down: %v", err)
	}
	if err := Down(dir); err != nil {
		t.Errorf("a second Down: %v", err)
	}
	if loadErr != nil {
		t.Errorf("Load before Down: %v", loadErr)
		return
	}
	for _, n := range l.Namespaces {
		if _, err := os.Stat(nsPath(n)); !os.IsNotExist(err) {
			t.Errorf("namespace %s left: %v", n, err)
		}
	}
	for _, c := range l.Cgroups {
		if _, err := os.Stat(c); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %v", c, err)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, m := range l.Mounts {
		if strings.Contains(string(mounts), " "+m+" ") {
			t.Errorf("bpffs %s still mounted", m)
		}
	}
	for _, p := range l.Procs {
		if p.Alive() {
			t.Errorf("%s (pid %d) still running", p.Name, p.PID)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s left: %v", dir, err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), prefix+"-") {
		t.Errorf("namespaces with prefix %s left:\n%s", prefix, out)
	}
}
