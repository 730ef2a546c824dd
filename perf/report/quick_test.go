package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestQuickReport runs the quick suite for real (make perf-quick: compare.sh
// in open loop against rampart, the chain, nginx and haproxy; the bpf, route
// and swap benchmarks) and checks the report's structure — every section
// ran, the plots are embedded, results.json parses with every expected
// series and no NaN — not its numbers. It needs root (BPF, taskset on two
// CPUs) and the perf tools (hack/deps.sh perf); without them it skips
// naming what is missing, except in CI (CI=1), where it fails.
func TestQuickReport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the quick perf suite takes ~2.5 minutes")
	}
	needPerfLab(t, 2, "nginx", "haproxy", "openssl", "curl", "ss", "pgrep", "taskset", "go")
	out := t.TempDir()
	o, err := parseArgs([]string{"-suite", "quick", "-root", "../..", "-out", out}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := build(ctx, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", Summary(res))
	for name, st := range map[string]string{"load": res.Load.Status, "xdp": res.XDP.Status, "flood": res.XDP.FloodStatus,
		"routes": res.Routes.Status, "swap": res.Swap.Status, "capacity": res.Capacity.Status} {
		if st != statusOK {
			t.Errorf("section %s: %s (raw outputs: %s/logs)", name, st, out)
		}
	}
	if !strings.HasPrefix(res.Lab.Status, "not run") || !strings.HasPrefix(res.Compare.Status, "not run") {
		t.Errorf("lab %q, comparison %q: want not run", res.Lab.Status, res.Compare.Status)
	}
	var series []string
	for _, p := range []string{"h1", "h2", "h3"} {
		for _, m := range []string{"ka", "new"} {
			proxies := []string{"rampart", "chain", "nginx", "haproxy"}
			switch p {
			case "h2":
				proxies = append(proxies, "rampart-h2")
			case "h3":
				proxies = proxies[:2]
			}
			for _, px := range proxies {
				series = append(series, p+" "+m+" "+px)
			}
		}
	}
	checkReport(t, out, series)
	if n, want := len(res.Load.Series), len(series)*len(o.suite.Rates); n != want { // quick: as many new rates as ka rates
		t.Errorf("%d load series, want %d", n, want)
	}
	seen := map[string]bool{}
	for _, it := range res.Routes.Items {
		size := "20k"
		if it.Routes >= 300_000 {
			size = "300k"
		}
		seen[it.Name+" "+size] = it.NSPerOp > 0
	}
	for _, want := range []string{"lookup 20k", "lookup 300k", "compile 20k", "compile 300k"} {
		if !seen[want] {
			t.Errorf("no route figure %q (have %v)", want, seen)
		}
	}
	if len(res.XDP.Paths) == 0 || len(res.XDP.Flood) != 2 {
		t.Errorf("xdp: %d paths, %d floods", len(res.XDP.Paths), len(res.XDP.Flood))
	}
}

// needPerfLab fails the test in CI (CI=1), and skips it elsewhere, naming
// what is missing: root, cpus CPUs (for pinning) and the tools.
func needPerfLab(t *testing.T, cpus int, tools ...string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if runtime.NumCPU() < cpus {
		missing = append(missing, fmt.Sprintf("%d CPUs (pinning)", cpus))
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		msg := t.Name() + " needs " + strings.Join(missing, ", ") + " (hack/deps.sh perf; run as root)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}
