package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
		"gc url":    {addr: "a:1", proto: "h1", n: 1, parallel: 1, gcMetrics: "127.0.0.1:1/metrics", gcWait: time.Second},
		"gc wait":   {addr: "a:1", proto: "h1", n: 1, parallel: 1, gcMetrics: "http://127.0.0.1:1/metrics"},
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

func TestParseGCCount(t *testing.T) {
	got, err := parseGCCount("# HELP go_gc_duration_seconds x\ngo_gc_duration_seconds_sum 0.01\ngo_gc_duration_seconds_count 17\ngo_goroutines 9\n")
	if err != nil || got != 17 {
		t.Fatalf("parseGCCount = %d, %v", got, err)
	}
	for _, bad := range []string{"", "go_goroutines 9\n", "go_gc_duration_seconds_count x\n", "go_gc_duration_seconds_count -1\n", "go_gc_duration_seconds_count 1.5e3\n"} {
		if _, err := parseGCCount(bad); err == nil {
			t.Errorf("parseGCCount(%q) accepted", bad)
		}
	}
}

// TestWaitGC: the wait ends once the count grows, and fails past its limit
// or on a page without the count.
func TestWaitGC(t *testing.T) {
	var n atomic.Int64
	n.Store(5)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/none" {
			fmt.Fprintln(w, "up 1")
			return
		}
		fmt.Fprintf(w, "go_gc_duration_seconds_count %d\n", n.Load())
	}))
	defer srv.Close()
	go func() { time.Sleep(1500 * time.Millisecond); n.Add(1) }()
	if _, err := waitGC(srv.URL+"/metrics", time.Minute); err != nil {
		t.Fatalf("waitGC after the count grew: %v", err)
	}
	if _, err := waitGC(srv.URL+"/metrics", time.Second); err == nil || !strings.Contains(err.Error(), "no garbage collection within") {
		t.Fatalf("waitGC with a count that stays: %v", err)
	}
	if _, err := waitGC(srv.URL+"/none", time.Minute); err == nil || !strings.Contains(err.Error(), "no go_gc_duration_seconds_count") {
		t.Fatalf("waitGC on a page without the count: %v", err)
	}
}

func FuzzParseGCCount(f *testing.F) {
	f.Add("go_gc_duration_seconds_count 17\n")
	f.Add("go_gc_duration_seconds_count 99999999999999999999\n")
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := parseGCCount(s); err == nil && v < 0 {
			t.Fatalf("negative count %d from %q", v, s)
		}
	})
}
