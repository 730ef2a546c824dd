package main

import (
	"strings"
	"testing"
)

func TestParseRSS(t *testing.T) {
	got, err := parseRSS("Name:\tnginx\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\nThreads: 1\n")
	if err != nil || got != 2048<<10 {
		t.Fatalf("parseRSS = %d, %v", got, err)
	}
	for _, bad := range []string{"", "VmRSS: x kB\n", "VmRSS: 10 MB\n", "VmRSS: -1 kB\n", "VmRSS:\n"} {
		if _, err := parseRSS(bad); err == nil {
			t.Errorf("parseRSS(%q) accepted", bad)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	p, err := parsePIDs("12, 34")
	if err != nil || len(p) != 2 || p[0] != 12 || p[1] != 34 {
		t.Fatalf("%v %v", p, err)
	}
	for _, bad := range []string{"", "x", "0", "-3", ","} {
		if _, err := parsePIDs(bad); err == nil {
			t.Errorf("parsePIDs(%q) accepted", bad)
		}
	}
}

func TestCheck(t *testing.T) {
	ok := config{addr: "127.0.0.1:1", proto: "h1", n: 10, parallel: 2}
	if err := check(ok); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]config{
		"no addr":   {proto: "h1", n: 1, parallel: 1},
		"bad proto": {addr: "a:1", proto: "h3", n: 1, parallel: 1},
		"n zero":    {addr: "a:1", proto: "h1", n: 0, parallel: 1},
		"parallel":  {addr: "a:1", proto: "h1", n: 1, parallel: 0},
	} {
		if err := check(c); err == nil || !strings.Contains(err.Error(), "-") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzParseRSS(f *testing.F) {
	f.Add("VmRSS:\t 123 kB\n")
	f.Add("VmRSS: 9999999999999999999999 kB")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseRSS(s)
		if err == nil && v < 0 {
			t.Fatalf("negative RSS %d from %q", v, s)
		}
	})
}
