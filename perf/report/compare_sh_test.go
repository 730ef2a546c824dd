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
	} {
		cmd := exec.Command("bash", "../compare.sh")
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: err %v, output %q; want it to say %q", tc.env, err, out, tc.want)
		}
	}
}
