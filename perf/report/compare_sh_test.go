package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCompareShRefusesBadKnobs: perf/compare.sh checks the knobs the report
// sets before it starts anything, and says which one is wrong.
func TestCompareShRefusesBadKnobs(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash:", err)
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"RATES=abc"}, "RATES: 'abc' is not a positive whole number"},
		{[]string{"RATES=0"}, "RATES: '0' is not a positive whole number"},
		{[]string{"RATES=100", "NEW_RATES=1.5"}, "NEW_RATES: '1.5' is not a positive whole number"},
		{[]string{"RATES=100", "MODES=keep"}, "MODES: 'keep' is not ka or new"},
		{[]string{"PIN=2"}, "PIN must be 0 or 1"},
		{[]string{"PIN=1", "PROXY_CPU=0", "LOAD_CPU=0"}, "PROXY_CPU and LOAD_CPU must differ"},
		{[]string{"PIN=1", "PROXY_CPU=999"}, "CPU '999' is not one of this machine's"},
		{[]string{"HAPROXY=yes"}, "HAPROXY must be 0 or 1"},
		{[]string{"H2_VARIANT=2"}, "H2_VARIANT must be 0 or 1"},
		{[]string{"H2_SERVER=nghttp2"}, "H2_SERVER must be std or rampart"},
		{[]string{"PROTO=h4"}, "PROTO must be h1, h2, h3 or all"},
		{[]string{"CHAIN=2"}, "CHAIN must be 0 or 1"},
		{[]string{"BASELINE=/nonexistent/rampart"}, "BASELINE=/nonexistent/rampart is not an executable"},
		{[]string{"BASELINE=/bin/true", "BASELINE_PORT=18443"}, "the *_PORT knobs must differ"},
	} {
		cmd := exec.Command("bash", "../compare.sh")
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: err %v, output %q; want it to say %q", tc.env, err, out, tc.want)
		}
	}
}

// TestCompareShBaseline runs compare.sh for real with BASELINE (one short
// h1 round): the baseline proxy is loaded in the same round as rampart and
// the summary gives the A/B line. Like TestQuickReport it needs root and
// the perf tools, and skips without them except in CI.
func TestCompareShBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds rampart and runs a 1-round comparison")
	}
	needPerfLab(t, 1, "nginx", "wrk", "openssl", "curl", "ss", "pgrep", "go")
	bin := t.TempDir() + "/rampart"
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/rampart").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command("bash", "../compare.sh")
	cmd.Env = append(os.Environ(), "RAMPART="+bin, "BASELINE="+bin, "PROTO=h1", "HAPROXY=0", "ROUNDS=1",
		"DURATION=1s", "WARMUP=1s", "RAMPART_PROTOCOLS=h2, http1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("compare.sh with BASELINE: %v\n%s", err, out)
	}
	var ab, row bool
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 7 && f[0] == "h1" && f[3] == "baseline" && f[4] != "0" {
			row = true // the per-proxy line: proto mode rate proxy req/cpu_s us/req p99
		}
		if strings.HasPrefix(line, "A/B (median of 1 rounds") {
			ab = true
		}
	}
	if !row || !ab {
		t.Fatalf("no baseline line (%v) or A/B summary (%v) in:\n%s", row, ab, out)
	}
}
