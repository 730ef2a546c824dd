package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/report.golden.html")

const xdpOut = `goos: linux
BenchmarkXDP/non-VIP_pass-2         	  200000	        25.10 ns/op	         6.000 bare-ns/op	         4.183 x-bare	        24.00 kernel-ns/op	         5.000 kernel-bare-ns/op	         4.800 kernel-x-bare
BenchmarkXDP/deny_hit-2             	  200000	        40.50 ns/op	         6.100 bare-ns/op	         6.639 x-bare	        39.00 kernel-ns/op	         5.000 kernel-bare-ns/op	         7.800 kernel-x-bare
PASS
`

const floodOut = `BenchmarkVethFlood/deny-2   	 1000000	         0 ns/op	   1250000 drops/s	    630000 drops/s/busy-core	   1400000 drops/s/softirq-core	        68.00 xdp-ns/pkt
BenchmarkVethFlood/limit-2  	 1000000	         0 ns/op	   1230000 drops/s	    610000 drops/s/busy-core	   1380000 drops/s/softirq-core	        70.00 xdp-ns/pkt
`

const lookupOut = `BenchmarkLookup-2       	  100000	       120.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkLookup300k-2   	  100000	       180.0 ns/op	       0 B/op	       0 allocs/op
`

const compileOut = `BenchmarkNewTable20k-2        	       1	  80000000 ns/op	     20600 routes	14000000 B/op	   99000 allocs/op
BenchmarkNewTable300k-2       	       1	1271720629 ns/op	    309000 routes	209847336 B/op	 1494182 allocs/op
BenchmarkTableMemory20k-2     	       1	  60000000 ns/op	        98.00 bytes/route	   2000000 heap-bytes	14000000 B/op	   99000 allocs/op
BenchmarkTableMemory300k-2    	       1	 962346809 ns/op	        98.36 bytes/route	  30393192 heap-bytes	209847336 B/op	 1494182 allocs/op
`

const swapOut = `=== RUN   TestSnapshotSwapUnderLoad
    swap_test.go:84: 5120 requests, 2400 before the swap, 0 failed
--- PASS: TestSnapshotSwapUnderLoad (2.10s)
`

// fake answers the commands the runner runs with canned outputs; compare.sh
// copies testdata/runs into its RUNS_DIR.
type fake struct {
	calls   []string
	fail    map[string]bool // a call containing this text fails
	labOuts map[string]string
}

func (f *fake) run(_ context.Context, dir string, env []string, name string, args ...string) (string, error) {
	call := strings.TrimSpace(name + " " + strings.Join(args, " "))
	f.calls = append(f.calls, call)
	for k := range f.fail {
		if strings.Contains(call, k) {
			return "boom: " + k + "\n", errors.New("exit status 1")
		}
	}
	a := strings.Join(args, " ")
	switch {
	case name == "git":
		return "abc1234\n", nil
	case name == "perf/compare.sh":
		var runs string
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "RUNS_DIR="); ok {
				runs = v
			}
		}
		if err := os.MkdirAll(runs, 0o755); err != nil {
			return "", err
		}
		ents, _ := os.ReadDir("testdata/runs")
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join("testdata/runs", e.Name()))
			if err := os.WriteFile(filepath.Join(runs, e.Name()), b, 0o644); err != nil {
				return "", err
			}
		}
		return "per proxy ...\n", nil
	case strings.Contains(a, "BenchmarkXDP$"):
		return xdpOut, nil
	case strings.Contains(a, "BenchmarkVethFlood$"):
		return floodOut, nil
	case strings.Contains(a, "Lookup|Lookup300k"):
		return lookupOut, nil
	case strings.Contains(a, "NewTable"):
		return compileOut, nil
	case strings.Contains(a, "TestSnapshotSwapUnderLoad"):
		return swapOut, nil
	case strings.Contains(a, "lab drill"):
		return f.labOuts[args[len(args)-1]], nil
	case strings.Contains(a, "lab ") || strings.HasPrefix(a, "build"):
		return "", nil
	}
	return "", errors.New("unexpected command " + call)
}

func fakeRunner(t *testing.T, f *fake) *Runner {
	return &Runner{Root: ".", Out: t.TempDir(), Run: f.run, NeedRoot: func() string { return "" }}
}

func TestExecuteAllSections(t *testing.T) {
	f := &fake{labOuts: map[string]string{
		"failover":    "FIGURE crash: error window: 180ms\nFIGURE crash: requests lost: 0\n",
		"bad-rollout": "FIGURE submit → canary runs the bad version: 2.1s\n",
	}}
	r := fakeRunner(t, f)
	s := Quick()
	s.Lab, s.RouteMem = true, true
	res := r.Execute(context.Background(), s)
	for name, st := range map[string]string{"load": res.Load.Status, "xdp": res.XDP.Status, "flood": res.XDP.FloodStatus,
		"routes": res.Routes.Status, "swap": res.Swap.Status, "lab": res.Lab.Status, "capacity": res.Capacity.Status} {
		if st != statusOK {
			t.Errorf("%s: status %q", name, st)
		}
	}
	if len(res.Load.Runs) != 8 || len(res.Load.Series) != 8 {
		t.Fatalf("%d runs, %d series", len(res.Load.Runs), len(res.Load.Series))
	}
	if len(res.XDP.Paths) != 2 || res.XDP.Paths[1].Name != "deny hit" || res.XDP.Paths[1].NS != 40.5 || res.XDP.Paths[1].BareNS != 6.1 {
		t.Fatalf("xdp paths %+v", res.XDP.Paths)
	}
	if len(res.XDP.Flood) != 2 || res.XDP.Flood[0].Name != "deny" || res.XDP.Flood[0].DropsPerS != 1_250_000 || res.XDP.Flood[1].XDPNSPkt != 70 {
		t.Fatalf("flood %+v", res.XDP.Flood)
	}
	want := []RouteBench{
		{Name: "lookup", Routes: 20_000, NSPerOp: 120}, {Name: "lookup", Routes: 300_000, NSPerOp: 180},
		{Name: "compile", Routes: 20_600, NSPerOp: 80e6, Allocs: 99000, Bytes: 14e6},
		{Name: "compile", Routes: 309_000, NSPerOp: 1271720629, Allocs: 1494182, Bytes: 209847336},
		{Name: "memory", Routes: 20_000, NSPerOp: 60e6, Allocs: 99000, Bytes: 14e6, HeapByte: 2e6},
		{Name: "memory", Routes: 300_000, NSPerOp: 962346809, Allocs: 1494182, Bytes: 209847336, HeapByte: 30393192},
	}
	if !slices.Equal(res.Routes.Items, want) {
		t.Fatalf("routes\n got %+v\nwant %+v", res.Routes.Items, want)
	}
	if res.Swap.Requests != 5120 || res.Swap.Errors != 0 {
		t.Fatalf("swap %+v", res.Swap)
	}
	if len(res.Lab.Drills) != 2 || len(res.Lab.Drills[0].Figures) != 2 || res.Lab.Drills[0].Figures[0].Value != "180ms" {
		t.Fatalf("lab %+v", res.Lab)
	}
	// h1 ka chain at 200 req/s: p99 3.9 ms, so Q is at least 200
	if c := res.Capacity.Capacity; c.Q != 200 || c.Bound != "at least" || res.Capacity.Sizing == nil || res.Capacity.Sizing.Fleet != 3*1787 {
		t.Fatalf("capacity %+v %+v", c, res.Capacity.Sizing)
	}
	// compare.sh runs first, the lab last, and it is taken down
	if !strings.HasPrefix(f.calls[1], "perf/compare.sh") || !strings.Contains(f.calls[len(f.calls)-1], "lab down") {
		t.Fatalf("calls %q", f.calls)
	}
	for _, name := range []string{"compare.txt", "bpf-xdp.txt", "bpf-flood.txt", "routes.txt", "swap.txt", "lab-drill-failover.txt"} {
		if _, err := os.Stat(filepath.Join(r.Out, "logs", name)); err != nil {
			t.Errorf("log %s: %v", name, err)
		}
	}
}

func TestExecuteFailuresKeepTheRest(t *testing.T) {
	f := &fake{fail: map[string]bool{"BenchmarkXDP$": true, "TestSnapshotSwapUnderLoad": true}}
	r := fakeRunner(t, f)
	res := r.Execute(context.Background(), Quick())
	if !strings.HasPrefix(res.XDP.Status, "failed: ") || !strings.Contains(res.XDP.Status, "boom") {
		t.Errorf("xdp status %q", res.XDP.Status)
	}
	if !strings.HasPrefix(res.Swap.Status, "failed: ") {
		t.Errorf("swap status %q", res.Swap.Status)
	}
	if res.XDP.FloodStatus != statusOK || res.Routes.Status != statusOK || res.Load.Status != statusOK || len(res.Load.Series) != 8 {
		t.Errorf("the other sections: flood %q routes %q load %q", res.XDP.FloodStatus, res.Routes.Status, res.Load.Status)
	}
	if !strings.HasPrefix(res.Lab.Status, "not run: PERF_LAB=1") {
		t.Errorf("lab %q", res.Lab.Status)
	}
	// without root, the BPF and lab sections say so and run nothing
	f2 := &fake{}
	r2 := fakeRunner(t, f2)
	r2.NeedRoot = func() string { return "not run: needs root" }
	s := Quick()
	s.Lab = true
	res = r2.Execute(context.Background(), s)
	if res.XDP.Status != "not run: needs root" || res.Lab.Status != "not run: needs root" {
		t.Errorf("without root: xdp %q lab %q", res.XDP.Status, res.Lab.Status)
	}
	for _, c := range f2.calls {
		if strings.Contains(c, "./bpf/") || strings.Contains(c, "lab") {
			t.Errorf("ran %q without root", c)
		}
	}
	// a swap with errors is a failure even when the test log parses
	if st := (&Runner{Run: func(context.Context, string, []string, string, ...string) (string, error) {
		return "    swap_test.go:90: 3 of 900 requests failed\n", errors.New("exit status 1")
	}}).swap(context.Background()).Status; !strings.Contains(st, "3 of 900 requests failed") {
		t.Errorf("swap with errors: %q", st)
	}
}

func TestExecuteSelectedSections(t *testing.T) {
	f := &fake{}
	r := fakeRunner(t, f)
	o, err := parseArgs([]string{"-sections", "routes,swap"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	res := r.Execute(context.Background(), o.suite)
	if res.Routes.Status != statusOK || res.Swap.Status != statusOK {
		t.Fatalf("routes %q swap %q", res.Routes.Status, res.Swap.Status)
	}
	for name, st := range map[string]string{"load": res.Load.Status, "xdp": res.XDP.Status, "lab": res.Lab.Status} {
		if !strings.HasPrefix(st, "not run: not in -sections routes,swap") {
			t.Errorf("%s: %q", name, st)
		}
	}
	for _, c := range f.calls {
		if strings.Contains(c, "compare.sh") || strings.Contains(c, "./bpf/") {
			t.Errorf("ran %q", c)
		}
	}
	_, load := res.Took["load"]
	_, routes := res.Took["routes"]
	if _, swap := res.Took["swap"]; load || !routes || !swap || len(res.Took) != 3 {
		t.Errorf("took %v", res.Took)
	}
}

func TestFreePorts(t *testing.T) {
	env, err := freePorts()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, e := range env {
		k, v, _ := strings.Cut(e, "=")
		if k != portKnobs[i] || seen[v] || v < "20000" || v > "29999" || len(v) != 5 {
			t.Fatalf("%q: want %s=<a distinct port in 20000-29999>", e, portKnobs[i])
		}
		seen[v] = true
	}
}

func TestCompareEnv(t *testing.T) {
	env := strings.Join(compareEnv(Quick(), "/x/runs"), " ")
	for _, want := range []string{"CHAIN=1", "HAPROXY=1", "H2_VARIANT=1", "RATES=100 300", "NEW_RATES=100 300", "MODES=ka new", "ROUNDS=1", "DURATION=1s", "RUNS_DIR=/x/runs"} {
		if !strings.Contains(env, want) {
			t.Errorf("env %q lacks %q", env, want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	noEnv := func(string) string { return "" }
	o, err := parseArgs(nil, noEnv)
	if err != nil || o.suite.Name != "quick" || o.out != "perf/out" || o.suite.Lab {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = parseArgs([]string{"-suite", "full", "-rates", "100,300", "-modes", "ka", "-p99-target", "20", "-regions", "4", "-regions-lost", "2"},
		func(k string) string { return map[string]string{"PERF_LAB": "1"}[k] })
	if err != nil || o.suite.Name != "full" || !slices.Equal(o.suite.Rates, []float64{100, 300}) || !slices.Equal(o.suite.Modes, []string{"ka"}) ||
		o.suite.Target != 20 || o.suite.Regions != 4 || o.suite.Lost != 2 || !o.suite.Lab || o.suite.Rounds != 3 {
		t.Fatalf("%+v %v", o.suite, err)
	}
	for _, bad := range [][]string{
		{"-suite", "slow"}, {"-rates", "0"}, {"-new-rates", "x"}, {"-rates", "1.5"}, {"-rates", "a"}, {"-modes", "keep"}, {"-protos", "h4"},
		{"-protos", "h1,h3"}, {"-rounds", "-1"}, {"-duration", "1ms"}, {"-p99-target", "-3"}, {"-headroom", "1"},
		{"-regions", "1", "-regions-lost", "1"}, {"extra"}, {"-sections", "load,cpu"}, {"-lab-drills", "a/b"},
	} {
		if _, err := parseArgs(bad, noEnv); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// goldenResults is a fixed report: the test runs, canned benchmarks, fixed
// times, so the HTML is byte-for-byte stable.
func goldenResults(t *testing.T) *Results {
	t.Helper()
	r := fakeRunner(t, &fake{labOuts: map[string]string{"failover": "FIGURE crash: error window: 180ms\n"}})
	s := Quick()
	s.Lab, s.LabDrills = true, []string{"failover"}
	res := r.Execute(context.Background(), s)
	res.Generated, res.Host = "2026-12-03T12:00:00Z", "testhost, linux/amd64, 2 CPUs"
	res.Load.Command = "env ... perf/compare.sh"
	res.XDP.Command, res.Routes.Command, res.Swap.Command = "go test ./bpf/", "go test ./l7/route/", "go test ./l7/proxy/"
	old := res
	old.Load.Series = slices.Clone(res.Load.Series)
	old.Load.Series[1].ReqPerCPU.Median = 2000
	old.Generated = "2026-12-02T12:00:00Z"
	res.Compare = compareSection(&res, &old, "perf/out/results.json", nil)
	return &res
}

func TestHTMLGolden(t *testing.T) {
	res := goldenResults(t)
	stub := Plots{XDP: "<svg>xdp</svg>", Routes: "<svg>routes</svg>"}
	for _, k := range []string{"ka", "new"} {
		stub.Load = append(stub.Load, LoadPlot{Proto: "h1", Mode: k, P99: "<svg>p99</svg>", Eff: "<svg>eff</svg>", CPU: "<svg>cpu</svg>"})
	}
	var b bytes.Buffer
	if err := RenderHTML(&b, res, stub); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.html")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./perf/report -run TestHTMLGolden -update writes it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		got := filepath.Join(t.TempDir(), "report.html")
		_ = os.WriteFile(got, b.Bytes(), 0o644)
		t.Fatalf("report.html differs from %s (got: %s; -update rewrites it)", golden, got)
	}
}

// TestWriteReport draws the real plots and checks the written files.
func TestWriteReport(t *testing.T) {
	res := goldenResults(t)
	out := t.TempDir()
	if err := write(out, res); err != nil {
		t.Fatal(err)
	}
	checkReport(t, out, []string{"h1 ka rampart", "h1 ka chain", "h1 ka nginx", "h1 ka haproxy", "h1 new chain"})
	if h, _ := os.ReadFile(filepath.Join(out, "report.html")); !strings.Contains(string(h), `id="sizing"`) {
		t.Error("no sizing in report.html")
	}
}

func TestCapacitySection(t *testing.T) {
	s := Quick()
	miss := []LoadSeries{{Proto: "h1", Mode: "ka", Proxy: "chain", Rate: 200, P99ms: Spread{Median: 80, N: 1}, Achieved: Spread{Median: 200, N: 1}}}
	c := capacitySection(miss, s)
	if c.Status != statusOK || c.Capacity.Bound != "below" || c.Sizing != nil || !strings.Contains(c.SizingErr, "no measured rate met") {
		t.Fatalf("all missed: %+v", c)
	}
	if c := capacitySection(nil, s); !strings.HasPrefix(c.Status, "not run") {
		t.Fatalf("no series: %+v", c)
	}
	var b bytes.Buffer
	res := &Results{Capacity: c}
	if err := RenderHTML(&b, res, Plots{}); err != nil || !strings.Contains(b.String(), `id="no-sizing"`) {
		t.Fatalf("no sizing shown: %v", err)
	}
}

// checkReport checks report.html and results.json's structure (not the
// numbers): every section, an inline SVG per plot, every expected series,
// no NaN.
func checkReport(t *testing.T, out string, series []string) {
	t.Helper()
	h, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(h)
	if !strings.Contains(html, `id="sizing"`) && !strings.Contains(html, `id="no-sizing"`) {
		t.Errorf("report.html has neither the sizing nor why there is none")
	}
	for _, id := range []string{`id="capacity"`, `id="load"`, `id="series"`, `id="xdp"`, `id="routes"`, `id="swap"`, `id="lab"`, `id="comparison"`, `id="reproduce"`} {
		if !strings.Contains(html, id) {
			t.Errorf("report.html has no %s", id)
		}
	}
	if n := strings.Count(html, "<svg"); n < 3 {
		t.Errorf("report.html embeds %d SVG plots", n)
	}
	if strings.Contains(html, "plot: ") || strings.Contains(html, "NaN") || strings.Contains(html, "src=\"http") {
		t.Errorf("report.html has a plot error, a NaN or an external resource")
	}
	j, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(j, &res); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if res.Schema != SchemaVersion {
		t.Errorf("schema %q", res.Schema)
	}
	have := map[string]bool{}
	for _, s := range res.Load.Series {
		have[s.Proto+" "+s.Mode+" "+s.Proxy] = true
		if s.ReqPerCPU.N == 0 || s.P99ms.N == 0 {
			t.Errorf("series %s %s %s @%v: empty figures %+v", s.Proto, s.Mode, s.Proxy, s.Rate, s)
		}
	}
	for _, want := range series {
		if !have[want] {
			t.Errorf("results.json has no series %q (has %v)", want, have)
		}
	}
	if res.Capacity.Capacity.Series != "h1 ka chain" {
		t.Errorf("capacity %+v", res.Capacity)
	}
}

func TestMakePlotsEmbedsSVG(t *testing.T) {
	ps := MakePlots(goldenResults(t))
	if len(ps.Errors) > 0 || len(ps.Load) != 2 {
		t.Fatalf("errors %v, %d load plots", ps.Errors, len(ps.Load))
	}
	for _, lp := range append(ps.Load, LoadPlot{P99: ps.XDP, Eff: ps.Routes, CPU: ps.Load[0].CPU}) {
		for _, h := range []string{string(lp.P99), string(lp.Eff), string(lp.CPU)} {
			if !strings.HasPrefix(h, "<svg") || !strings.HasSuffix(strings.TrimSpace(h), "</svg>") {
				t.Fatalf("not an inline SVG: %.80q", h)
			}
		}
	}
	if empty := MakePlots(&Results{}); !empty.Missing || len(empty.Load) != 0 || len(empty.Errors) != 0 {
		t.Fatalf("no data: %+v", empty)
	}
}

func TestBuildFromRunsAndBaseline(t *testing.T) {
	out := t.TempDir()
	o, err := parseArgs([]string{"-runs", "testdata/runs/runs.tsv", "-out", out}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	res, err := build(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Compare.Status, "not run: no previous results") || !strings.HasPrefix(res.XDP.Status, "not run") {
		t.Fatalf("first: comparison %q, xdp %q", res.Compare.Status, res.XDP.Status)
	}
	// the second build compares with the first's results.json
	res, err = build(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Compare.Status != statusOK || len(res.Compare.Rows) == 0 {
		t.Fatalf("second: %+v", res.Compare)
	}
	// a baseline of another suite is compared, with a warning
	old := *res
	old.Suite = "full"
	b, _ := json.Marshal(old)
	other := filepath.Join(out, "full.json")
	_ = os.WriteFile(other, b, 0o644)
	o2 := o
	o2.baseline = other
	if r2, err := build(context.Background(), o2, nil); err != nil || !strings.Contains(r2.Compare.Status, "the baseline is the full suite") || len(r2.Compare.Rows) == 0 {
		t.Fatalf("other suite: %+v %v", r2.Compare, err)
	}
	// a baseline of another schema is refused, and said so
	bad := filepath.Join(out, "old.json")
	_ = os.WriteFile(bad, []byte(`{"schema":"rampart-perf-results/0"}`), 0o644)
	o.baseline = bad
	if res, err = build(context.Background(), o, nil); err != nil || !strings.Contains(res.Compare.Status, "schema") {
		t.Fatalf("bad baseline: %q %v", res.Compare.Status, err)
	}
	if s := Summary(res); !strings.Contains(s, "capacity: Q = 200 req/s") || !strings.Contains(s, "fleet: 3 regions × 1787 = 5361") {
		t.Fatalf("summary:\n%s", s)
	}
}
