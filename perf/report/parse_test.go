package main

import (
	"math"
	"strings"
	"testing"
)

const wrkOut = `Running 2s test @ https://127.0.0.1:18443/bench
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.31ms  456.78us   9.87ms   80.12%
    Req/Sec    24.10k     1.23k   26.00k    70.00%
  Latency Distribution
     50%    1.25ms
     75%    1.50ms
     90%    1.80ms
     99%  850.00us
  96000 requests in 2.00s, 30.12MB read
  Non-2xx or 3xx responses: 12
  Socket errors: connect 0, read 1, write 0, timeout 2
Requests/sec:  47980.12
Transfer/sec:     15.05MB
`

const h2loadOut = `starting benchmark...
spawning thread #0: 32 total client(s). Timing-based test with 0s of warm-up time and 2s of main duration for timing-based test
Warm-up phase is over for thread #0.
Main benchmark duration is over for thread #0. Stopping all clients.
finished in 2.00s, 20000.50 req/s, 2.50MB/s
requests: 40000 total, 40640 started, 40000 done, 39990 succeeded, 10 failed, 0 errored, 0 timeout
status codes: 39980 2xx, 0 3xx, 15 4xx, 5 5xx
traffic: 5.00MB (5242880) total, 1.00MB (1048576) headers (space savings 90.00%), 3.00MB (3145728) data
                     min         max         mean         sd        +/- sd
time for request:      200us     20.00ms      3.00ms      1.00ms    70.00%
`

const openloadOut = `offered: 2000 req/s for 2s (h1, c=64, new=false)
sent: 4000
requests: 3990
non2xx: 4
errors: 3
overload: 3
elapsed: 2.004s
req/s: 1991.0
latency_us: p50=812 p90=1500 p99=4100 p99.9=9000 max=12000
error-sample: dial tcp: connection refused
`

const h3loadOut = `h3load: https://127.0.0.1:18443/bench conns=64 streams/conn=10 duration=2s gomaxprocs=2
tls: TLS 1.3 TLS_AES_128_GCM_SHA256 alpn=h3 proto=HTTP/3.0
connect: 64 connections in 44ms
dials: 64
requests: 123456
non2xx: 2 (1xx=0 3xx=0 4xx=2 5xx=0 other=0)
errors: 1
elapsed: 10.004s
req/s: 12340.5
latency_us: p50=45055 p90=81919 p99=122879 p99.9=147455 max<=180223
`

func TestParseTools(t *testing.T) {
	for _, tc := range []struct {
		tool, text string
		want       ToolOut
	}{
		{"wrk", wrkOut, ToolOut{Tool: "wrk", Sent: 96000 - 12 + 12 + 3, Requests: 96000 - 12, Non2xx: 12, Errors: 3, RPS: 47980.12, P50us: 1250, P99us: 850}},
		{"h2load", h2loadOut, ToolOut{Tool: "h2load", Sent: 39980 + 20 + 10, Requests: 39980, Non2xx: 20, Errors: 10, RPS: 20000.5}},
		{"openload", openloadOut, ToolOut{Tool: "openload", Sent: 4000, Requests: 3990, Non2xx: 4, Errors: 3, Overload: 3, RPS: 1991, P50us: 812, P99us: 4100}},
		{"h3load", h3loadOut, ToolOut{Tool: "h3load", Sent: 123459, Requests: 123456, Non2xx: 2, Errors: 1, RPS: 12340.5, P50us: 45055, P99us: 122879}},
	} {
		got, err := ParseTool(tc.tool, tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.tool, err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.tool, got, tc.want)
		}
	}
	if o, _ := ParseOpenload(openloadOut); o.Failed() != 10 {
		t.Errorf("openload failed = %d, want 10", o.Failed())
	}
}

// Each missing line is named; what was read is kept.
func TestParseToolsRefuseIncompleteOutput(t *testing.T) {
	for _, tc := range []struct {
		tool, text, wantErr string
	}{
		{"wrk", strings.Replace(wrkOut, "Requests/sec:  47980.12", "", 1), `no "Requests/sec:" line`},
		{"wrk", strings.Replace(wrkOut, "96000 requests in", "many requests in", 1), "not a count"},
		{"wrk", strings.Replace(wrkOut, "read 1,", "read x,", 1), "socket errors line"},
		{"wrk", strings.Replace(wrkOut, "1.25ms", "1.25", 1), "no unit"},
		{"h2load", strings.Replace(h2loadOut, "status codes:", "codes:", 1), `no "status codes:" line`},
		{"h2load", strings.Replace(h2loadOut, "20000.50 req/s", "NaN req/s", 1), "not a finite"},
		{"openload", strings.Replace(openloadOut, "overload: 3\n", "", 1), `no "overload" line`},
		{"openload", strings.Replace(openloadOut, "sent: 4000", "sent: -4", 1), "not a count"},
		{"openload", "", `no "sent" line`},
		{"h3load", strings.Replace(h3loadOut, "req/s: 12340.5", "req/s: +Inf", 1), "not a finite"},
		{"vegeta", "", "unknown load tool"},
	} {
		got, err := ParseTool(tc.tool, tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want it to contain %q", tc.tool, err, tc.wantErr)
		}
		if tc.tool == "openload" && tc.text != "" && got.Requests != 3990 && !strings.Contains(tc.wantErr, "sent") {
			t.Errorf("openload: good fields lost: %+v", got)
		}
	}
}

const benchOut = `goos: linux
goarch: amd64
pkg: github.com/rampart-edge/rampart/bpf
BenchmarkXDP/non-VIP_pass-2         	20000000	        11.52 ns/op	         5.900 bare-ns/op	         1.953 x-bare	        11.00 kernel-ns/op	         5.000 kernel-bare-ns/op	         2.200 kernel-x-bare
BenchmarkXDP/deny_hit
    bench_test.go:120: some log line
BenchmarkXDP/deny_hit-2             	20000000	        30.10 ns/op	         6.000 bare-ns/op	         5.017 x-bare
BenchmarkLookup300k-2   	 1000000	      1042 ns/op	       0 B/op	       0 allocs/op
BenchmarkBroken-2   	 1000000	      abc ns/op
BenchmarkOdd-2   	 1000000	      12
PASS
ok  	github.com/rampart-edge/rampart/bpf	12.3s
`

func TestParseBench(t *testing.T) {
	bs, err := ParseBench(benchOut)
	if err == nil || !strings.Contains(err.Error(), "Broken") || !strings.Contains(err.Error(), "Odd") {
		t.Errorf("error %v, want both bad lines named", err)
	}
	if len(bs) != 3 {
		t.Fatalf("got %d benchmarks, want 3: %+v", len(bs), bs)
	}
	if b := bs[0]; b.Name != "XDP/non-VIP_pass" || b.N != 20000000 || b.Metrics["ns/op"] != 11.52 || b.Metrics["x-bare"] != 1.953 || b.Metrics["kernel-x-bare"] != 2.2 {
		t.Errorf("first: %+v", b)
	}
	if b := bs[2]; b.Name != "Lookup300k" || b.Metrics["allocs/op"] != 0 || b.Metrics["ns/op"] != 1042 {
		t.Errorf("last: %+v", b)
	}
}

func TestParseFiguresAndSwap(t *testing.T) {
	figs := ParseFigures("drill failover\n  FIGURE stop: signal → drained at the router: 217ms\nnoise\n  FIGURE lost\n")
	if len(figs) != 2 || figs[0].Name != "stop: signal → drained at the router" || figs[0].Value != "217ms" || figs[1].Name != "lost" {
		t.Fatalf("figures: %+v", figs)
	}
	s, err := ParseSwap("=== RUN   TestSnapshotSwapUnderLoad\n    swap_test.go:86: 5123 requests, 40 before the swap, 0 failed\n--- PASS")
	if err != nil || s != (SwapOut{Requests: 5123, Before: 40}) {
		t.Fatalf("swap ok: %+v %v", s, err)
	}
	s, err = ParseSwap("    swap_test.go:76: 3 of 900 requests failed; first: EOF\n--- FAIL")
	if err != nil || s != (SwapOut{Requests: 900, Errors: 3}) {
		t.Fatalf("swap failed: %+v %v", s, err)
	}
	if _, err := ParseSwap("--- FAIL: TestSnapshotSwapUnderLoad\n"); err == nil {
		t.Fatal("no figure line: no error")
	}
}

func TestWrkDuration(t *testing.T) {
	for in, want := range map[string]float64{"845.00us": 845, "1.25ms": 1250, "2.01s": 2.01e6, "1.50m": 90e6} {
		d, err := wrkDuration(in)
		if err != nil || math.Abs(float64(d.Microseconds())-want) > 1 {
			t.Errorf("%s: %v %v, want %vus", in, d, err, want)
		}
	}
	for _, in := range []string{"", "ms", "1.2", "-1ms", "1e300h", "NaNs"} {
		if _, err := wrkDuration(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func checkToolOut(t *testing.T, o ToolOut) {
	for _, v := range []float64{o.RPS, o.P50us, o.P99us} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("bad figure in %+v", o)
		}
	}
	if o.Sent < 0 || o.Requests < 0 || o.Non2xx < 0 || o.Errors < 0 || o.Overload < 0 {
		t.Fatalf("negative count in %+v", o)
	}
}

func FuzzParseTools(f *testing.F) {
	for _, s := range []string{wrkOut, h2loadOut, openloadOut, h3loadOut, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tool := range []string{"wrk", "h2load", "openload", "h3load"} {
			o, _ := ParseTool(tool, s)
			checkToolOut(t, o)
		}
	})
}

func FuzzParseBench(f *testing.F) {
	f.Add(benchOut)
	f.Add("BenchmarkX-2 1 1 ns/op\n")
	f.Fuzz(func(t *testing.T, s string) {
		bs, _ := ParseBench(s)
		for _, b := range bs {
			if b.N <= 0 || b.Name == "" {
				t.Fatalf("bad benchmark %+v", b)
			}
			for u, v := range b.Metrics {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s: %v", u, v)
				}
			}
		}
		ParseFigures(s)
		ParseSwap(s)
	})
}
