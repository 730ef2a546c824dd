package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Suite is what one report run does: the load points and how long each
// benchmark runs. Quick and Full are the presets behind make perf-quick and
// make perf; every field can be overridden by a flag (main.go).
type Suite struct {
	Name      string    // "quick" or "full"
	Protos    []string  // h1, h2, h3
	Modes     []string  // ka, new
	Rates     []float64 // offered open-loop req/s (keep-alive)
	NewRates  []float64 // the same for a new connection per request
	Rounds    int
	Duration  string // each timed load run, e.g. "5s"
	Warmup    string // each proxy's warm-up per protocol
	Conns     int
	Pin       bool
	Haproxy   bool
	H2Variant bool     // + rampart-h2 in the h2 rounds: the bare proxy with h2_server: rampart
	XDPBench  string   // -benchtime of BenchmarkXDP
	Flood     string   // -benchtime of BenchmarkVethFlood
	Lookup    string   // -benchtime of the route lookups
	Compile   string   // -benchtime of the route compiles and table memory
	Count     int      // -count of the go benchmarks
	RouteMem  bool     // also the route tables' heap (BenchmarkTableMemory20k/300k)
	Sections  []string // run only these of load, xdp, routes, swap, lab; nil: all
	Lab       bool     // PERF_LAB=1: lab up, drills, lab down
	LabDrills []string
	Target    float64 // p99 target, ms
	Headroom  float64
	TotalRPS  float64
	Regions   int
	Lost      int
}

// Quick is make perf-quick: about two minutes on a 2-core box.
func Quick() Suite {
	return Suite{Name: "quick", Protos: []string{"h1", "h2", "h3"}, Modes: []string{"ka", "new"},
		Rates: []float64{100, 300}, NewRates: []float64{100, 300}, Rounds: 1, Duration: "1s", Warmup: "300ms", Conns: 16, Pin: true, Haproxy: true, H2Variant: true,
		XDPBench: "500000x", Flood: "300ms", Lookup: "100000x", Compile: "1x", Count: 1,
		LabDrills: []string{"failover", "bad-rollout"},
		Target:    50, Headroom: 0.30, TotalRPS: 500_000, Regions: 3, Lost: 1}
}

// Full is make perf: three interleaved rounds at four rates per mode (~30 minutes).
func Full() Suite {
	s := Quick()
	s.Name, s.Rates, s.NewRates = "full", []float64{500, 1000, 2000, 4000}, []float64{100, 200, 400, 800}
	s.Rounds, s.Duration, s.Warmup, s.Conns = 3, "5s", "2s", 64
	s.XDPBench, s.Flood, s.Lookup, s.Compile, s.Count, s.RouteMem = "4000000x", "1s", "1s", "3x", 3, true
	return s
}

// runFunc runs a command in dir with extra environment and returns its
// combined output; tests replace it.
type runFunc func(ctx context.Context, dir string, env []string, name string, args ...string) (string, error)

func execRun(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// on cancel, SIGTERM first so compare.sh's trap stops the proxies it started; SIGKILL 10 s later
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), err
}

// Runner runs the suite from the repository root and writes into Out.
type Runner struct {
	Root     string // repository root
	Out      string // output directory (perf/out)
	Run      runFunc
	Log      func(format string, args ...any)
	NeedRoot func() string // why root-only sections do not run, or ""; nil: needRoot
}

func (r *Runner) rootMissing() string {
	if r.NeedRoot != nil {
		return r.NeedRoot()
	}
	return needRoot()
}

func (r *Runner) logf(format string, args ...any) {
	if r.Log != nil {
		r.Log(format, args...)
	}
}

// saveLog keeps a section's raw output next to the report.
func (r *Runner) saveLog(name, text string) {
	_ = os.WriteFile(filepath.Join(r.Out, "logs", name), []byte(text), 0o644)
}

func failed(err error) string { return "failed: " + err.Error() }

// Execute runs every section; a section that fails is marked so in its
// status and the others still run.
func (r *Runner) Execute(ctx context.Context, s Suite) Results {
	if err := os.MkdirAll(filepath.Join(r.Out, "logs"), 0o755); err != nil {
		r.logf("perf/report: %v", err)
	}
	res := Results{Schema: SchemaVersion, Generated: time.Now().UTC().Format(time.RFC3339), Suite: s.Name}
	res.Commit = strings.TrimSpace(r.try(ctx, "git", "describe", "--always", "--dirty"))
	host, _ := os.Hostname()
	res.Host = fmt.Sprintf("%s, %s/%s, %d CPUs", host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	res.Config = Config{Protos: s.Protos, Modes: s.Modes, Rates: s.Rates, NewRates: s.NewRates, Rounds: s.Rounds, Duration: s.Duration,
		Pin: s.Pin, TargetP99ms: s.Target, Headroom: s.Headroom, TotalRPS: s.TotalRPS, Regions: s.Regions, RegionsLost: s.Lost}
	start := time.Now()
	res.Took = map[string]float64{}
	skipped := "not run: not in -sections " + strings.Join(s.Sections, ",")
	res.Load.Status, res.XDP.Status, res.XDP.FloodStatus = skipped, skipped, skipped
	res.Routes.Status, res.Swap.Status = skipped, skipped
	step := func(name, what string, f func()) {
		if s.Sections != nil && !slices.Contains(s.Sections, name) {
			return
		}
		t0 := time.Now()
		r.logf("%s: %s", name, what)
		f()
		res.Took[name] = time.Since(t0).Round(100 * time.Millisecond).Seconds()
		r.logf("%s: took %.1f s", name, res.Took[name])
	}
	step("load", "compare.sh, open loop ("+strings.Join(fmtRates(s.Rates), " ")+" req/s)", func() { res.Load = r.load(ctx, s) })
	step("xdp", "bpf BenchmarkXDP and BenchmarkVethFlood", func() { res.XDP = r.xdp(ctx, s) })
	step("routes", "l7/route lookup and compile at 20k and 300k", func() { res.Routes = r.routes(ctx, s) })
	step("swap", "l7/proxy TestSnapshotSwapUnderLoad", func() { res.Swap = r.swap(ctx) })
	res.Lab = LabSection{Status: skipped}
	if s.Lab {
		step("lab", "lab up, drills "+strings.Join(s.LabDrills, ", ")+", lab down", func() { res.Lab = r.lab(ctx, s) })
	} else if s.Sections == nil || slices.Contains(s.Sections, "lab") {
		res.Lab = r.lab(ctx, s)
	}
	res.Capacity = capacitySection(res.Load.Series, s)
	res.Took["total"] = time.Since(start).Round(100 * time.Millisecond).Seconds()
	r.logf("done in %s", time.Since(start).Round(time.Second))
	return res
}

func (r *Runner) try(ctx context.Context, name string, args ...string) string {
	out, err := r.Run(ctx, r.Root, nil, name, args...)
	if err != nil {
		return "unknown"
	}
	return out
}

func fmtRates(rs []float64) []string {
	out := make([]string, len(rs))
	for i, v := range rs {
		out[i] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return out
}

// compareEnv is the environment perf/compare.sh runs with for suite s.
func compareEnv(s Suite, runsDir string) []string {
	pin := "0"
	if s.Pin && runtime.NumCPU() >= 2 {
		pin = "1"
	}
	hap := "0"
	if s.Haproxy {
		hap = "1"
	}
	h2 := "0"
	if s.H2Variant {
		h2 = "1"
	}
	return []string{
		"PROTO=" + strings.Join(s.Protos, ","), "CHAIN=1", "HAPROXY=" + hap, "H2_VARIANT=" + h2, "PIN=" + pin,
		"RATES=" + strings.Join(fmtRates(s.Rates), " "), "NEW_RATES=" + strings.Join(fmtRates(s.NewRates), " "), "MODES=" + strings.Join(s.Modes, " "),
		"ROUNDS=" + strconv.Itoa(s.Rounds), "DURATION=" + s.Duration, "WARMUP=" + s.Warmup,
		"CONNS=" + strconv.Itoa(s.Conns), "RUNS_DIR=" + runsDir,
	}
}

// portKnobs are compare.sh's port variables; the first three also take UDP (HTTP/3).
var portKnobs = []string{"RAMPART_PORT", "CHAIN_PORT", "H2_PORT", "NGINX_PORT", "UPSTREAM_PORT", "ADMIN_PORT",
	"CHAIN_ADMIN_PORT", "HAPROXY_PORT", "H2_ADMIN_PORT"}

// freePorts finds a port for each of compare.sh's port knobs that is free on
// 127.0.0.1 for TCP (and UDP for the HTTP/3 ones), so the suite can run next
// to a compare.sh someone else started. It searches 20000–29999 (below the
// ephemeral range, so no outgoing connection takes one meanwhile), starting
// at an offset from the pid.
func freePorts() ([]string, error) {
	var env []string
	start := 20000 + (os.Getpid()%1000)*10
	for p := start; p < start+10000 && len(env) < len(portKnobs); p++ {
		port := 20000 + (p-20000)%10000
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		free := true
		if len(env) < 3 {
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				free = false
			} else {
				u.Close()
			}
		}
		l.Close()
		if free {
			env = append(env, portKnobs[len(env)]+"="+strconv.Itoa(port))
		}
	}
	if len(env) < len(portKnobs) {
		return nil, fmt.Errorf("free ports: found %d of %d in 20000-29999 on 127.0.0.1", len(env), len(portKnobs))
	}
	return env, nil
}

func (r *Runner) load(ctx context.Context, s Suite) LoadSection {
	runs := filepath.Join(r.Out, "runs")
	_ = os.RemoveAll(runs)
	env := compareEnv(s, runs)
	ports, err := freePorts()
	if err != nil {
		return LoadSection{Status: failed(err)}
	}
	protos := "all"
	if len(s.Protos) == 1 {
		protos = s.Protos[0]
	} else if !slices.Equal(s.Protos, []string{"h1", "h2", "h3"}) {
		return LoadSection{Status: failed(fmt.Errorf("protocols %v: want one of h1, h2, h3 or all three", s.Protos))}
	}
	env[0] = "PROTO=" + protos
	out, err := r.Run(ctx, r.Root, append(env, ports...), "perf/compare.sh")
	r.saveLog("compare.txt", out)
	sec := LoadSection{Status: statusOK, Command: "env " + strings.Join(env, " ") + " perf/compare.sh"}
	if err != nil {
		sec.Status = failed(fmt.Errorf("%w; %s", err, lastLines(out, 3)))
	}
	rs, rerr := ReadRuns(filepath.Join(runs, "runs.tsv"))
	sec.Runs, sec.Series = rs, Aggregate(rs)
	if rerr != nil && err == nil {
		sec.Status = failed(rerr)
	}
	return sec
}

// lastLines returns the last n non-empty lines of text, joined by " | ".
func lastLines(text string, n int) string {
	var ls []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			ls = append(ls, strings.TrimSpace(l))
		}
	}
	return strings.Join(ls[max(len(ls)-n, 0):], " | ")
}

// needRoot says why a section that needs root does not run, or "".
func needRoot() string {
	if os.Geteuid() != 0 {
		return "not run: needs root (BPF, network namespaces)"
	}
	return ""
}

func (r *Runner) benchArgs(pkg, pattern, benchtime string, count int) []string {
	return []string{"test", "-count=" + strconv.Itoa(max(count, 1)), "-run", "^$", "-bench", pattern,
		"-benchtime", benchtime, "-benchmem", "-timeout", "20m", pkg}
}

func (r *Runner) xdp(ctx context.Context, s Suite) XDPSection {
	sec := XDPSection{Command: "go " + strings.Join(r.benchArgs("./bpf/", "BenchmarkXDP$", s.XDPBench, s.Count), " ") +
		"; go " + strings.Join(r.benchArgs("./bpf/", "BenchmarkVethFlood$", s.Flood, s.Count), " ")}
	if why := r.rootMissing(); why != "" {
		sec.Status, sec.FloodStatus = why, why
		return sec
	}
	out, err := r.Run(ctx, r.Root, nil, "go", r.benchArgs("./bpf/", "BenchmarkXDP$", s.XDPBench, s.Count)...)
	r.saveLog("bpf-xdp.txt", out)
	bs, perr := ParseBench(out)
	sec.Paths = xdpPaths(bs)
	sec.Status = sectionStatus(err, perr, len(sec.Paths), out)
	out, err = r.Run(ctx, r.Root, nil, "go", r.benchArgs("./bpf/", "BenchmarkVethFlood$", s.Flood, s.Count)...)
	r.saveLog("bpf-flood.txt", out)
	bs, perr = ParseBench(out)
	sec.Flood = floods(bs)
	sec.FloodStatus = sectionStatus(err, perr, len(sec.Flood), out)
	return sec
}

// sectionStatus: ok when the command ran and gave results.
func sectionStatus(runErr, parseErr error, n int, out string) string {
	switch {
	case runErr != nil && out != "":
		return failed(fmt.Errorf("%w; %s", runErr, lastLines(out, 3)))
	case runErr != nil:
		return failed(runErr)
	case parseErr != nil:
		return failed(parseErr)
	case n == 0:
		return failed(fmt.Errorf("no benchmark results; %s", lastLines(out, 3)))
	}
	return statusOK
}

// group collects the results of each benchmark name (several with -count), in order.
func group(bs []Bench) ([]string, map[string][]Bench) {
	var names []string
	m := map[string][]Bench{}
	for _, b := range bs {
		if _, ok := m[b.Name]; !ok {
			names = append(names, b.Name)
		}
		m[b.Name] = append(m[b.Name], b)
	}
	return names, m
}

func medianOf(bs []Bench, unit string) float64 {
	var vs []float64
	for _, b := range bs {
		if v, ok := b.Metrics[unit]; ok {
			vs = append(vs, v)
		}
	}
	return SpreadOf(vs).Median
}

// subName turns "XDP/known_source_pass" into "known source pass".
func subName(name, parent string) (string, bool) {
	rest, ok := strings.CutPrefix(name, parent+"/")
	return strings.ReplaceAll(rest, "_", " "), ok
}

func xdpPaths(bs []Bench) []XDPPath {
	names, m := group(bs)
	var out []XDPPath
	for _, n := range names {
		sub, ok := subName(n, "XDP")
		if !ok {
			continue
		}
		g := m[n]
		out = append(out, XDPPath{Name: sub, NS: medianOf(g, "ns/op"), BareNS: medianOf(g, "bare-ns/op"),
			XBare: medianOf(g, "x-bare"), KernelNS: medianOf(g, "kernel-ns/op"), KernelBareNS: medianOf(g, "kernel-bare-ns/op")})
	}
	return out
}

func floods(bs []Bench) []Flood {
	names, m := group(bs)
	var out []Flood
	for _, n := range names {
		sub, ok := subName(n, "VethFlood")
		if !ok {
			continue
		}
		g := m[n]
		out = append(out, Flood{Name: sub, DropsPerS: medianOf(g, "drops/s"), DropsPerSCore: medianOf(g, "drops/s/busy-core"),
			XDPNSPkt: medianOf(g, "xdp-ns/pkt")})
	}
	return out
}

// routeBenches maps l7/route's benchmark names to what the report shows.
var routeBenches = map[string]struct {
	name   string
	routes int
}{
	"Lookup": {"lookup", 20_000}, "Lookup300k": {"lookup", 300_000},
	"NewTable20k": {"compile", 20_000}, "NewTable300k": {"compile", 300_000},
	"TableMemory20k": {"memory", 20_000}, "TableMemory300k": {"memory", 300_000},
}

func (r *Runner) routes(ctx context.Context, s Suite) RouteSect {
	lookup := r.benchArgs("./l7/route/", "^Benchmark(Lookup|Lookup300k)$", s.Lookup, s.Count)
	pattern := "^BenchmarkNewTable(20k|300k)$"
	if s.RouteMem {
		pattern = "^Benchmark(NewTable|TableMemory)(20k|300k)$"
	}
	compile := r.benchArgs("./l7/route/", pattern, s.Compile, s.Count)
	sec := RouteSect{Command: "go " + strings.Join(lookup, " ") + "; go " + strings.Join(compile, " ")}
	var all []Bench
	var runErrs, parseErrs []error
	var text strings.Builder
	for _, args := range [][]string{lookup, compile} {
		out, err := r.Run(ctx, r.Root, nil, "go", args...)
		text.WriteString(out)
		bs, perr := ParseBench(out)
		all = append(all, bs...)
		if err != nil {
			runErrs = append(runErrs, fmt.Errorf("%w; %s", err, lastLines(out, 3)))
		}
		parseErrs = append(parseErrs, perr)
	}
	r.saveLog("routes.txt", text.String())
	names, m := group(all)
	for _, n := range names {
		k, ok := routeBenches[n]
		if !ok {
			continue
		}
		g := m[n]
		rb := RouteBench{Name: k.name, Routes: k.routes, NSPerOp: medianOf(g, "ns/op"), Allocs: medianOf(g, "allocs/op"),
			Bytes: medianOf(g, "B/op"), HeapByte: medianOf(g, "heap-bytes")}
		if v := medianOf(g, "routes"); v > 0 {
			rb.Routes = int(v)
		}
		sec.Items = append(sec.Items, rb)
	}
	sec.Status = sectionStatus(errors.Join(runErrs...), errors.Join(parseErrs...), len(sec.Items), "")
	return sec
}

func (r *Runner) swap(ctx context.Context) SwapSection {
	args := []string{"test", "-count=1", "-run", "^TestSnapshotSwapUnderLoad$", "-v", "./l7/proxy/"}
	sec := SwapSection{Command: "go " + strings.Join(args, " ")}
	out, err := r.Run(ctx, r.Root, nil, "go", args...)
	r.saveLog("swap.txt", out)
	so, perr := ParseSwap(out)
	sec.SwapOut = so
	switch {
	case perr != nil && err != nil:
		sec.Status = failed(fmt.Errorf("%w; %s", err, lastLines(out, 3)))
	case perr != nil:
		sec.Status = failed(perr)
	case so.Errors > 0:
		sec.Status = failed(fmt.Errorf("%d of %d requests failed across the swap", so.Errors, so.Requests))
	default:
		sec.Status = statusOK
	}
	return sec
}

// lab brings the lab up in a temp dir, runs the drills and takes it down
// (PERF_LAB=1 only).
func (r *Runner) lab(ctx context.Context, s Suite) LabSection {
	if !s.Lab {
		return LabSection{Status: "not run: PERF_LAB=1 not set (make perf PERF_LAB=1 runs the lab drills)"}
	}
	if why := r.rootMissing(); why != "" {
		return LabSection{Status: why}
	}
	bin := filepath.Join(r.Out, "bin", "rampart")
	if out, err := r.Run(ctx, r.Root, nil, "go", "build", "-o", bin, "./cmd/rampart"); err != nil {
		return LabSection{Status: failed(fmt.Errorf("%w; %s", err, lastLines(out, 3)))}
	}
	dir, err := os.MkdirTemp("", "rampart-perf-lab")
	if err != nil {
		return LabSection{Status: failed(err)}
	}
	defer os.RemoveAll(dir)
	r.logf("lab: up in %s, drills %s", dir, strings.Join(s.LabDrills, ", "))
	out, err := r.Run(ctx, r.Root, nil, bin, "lab", "up", "-dir", dir, "-prefix", "rpf")
	r.saveLog("lab-up.txt", out)
	defer func() {
		out, _ := r.Run(context.WithoutCancel(ctx), r.Root, nil, bin, "lab", "down", "-dir", dir)
		r.saveLog("lab-down.txt", out)
	}()
	sec := LabSection{Status: statusOK}
	if err != nil {
		sec.Status = failed(fmt.Errorf("lab up: %w; %s", err, lastLines(out, 3)))
		return sec
	}
	for _, d := range s.LabDrills {
		out, err := r.Run(ctx, r.Root, nil, bin, "lab", "drill", "-dir", dir, d)
		r.saveLog("lab-drill-"+d+".txt", out)
		dr := Drill{Name: d, Status: statusOK, Figures: ParseFigures(out)}
		if err != nil {
			dr.Status = failed(fmt.Errorf("%w; %s", err, lastLines(out, 3)))
			sec.Status = "failed: drill " + d
		}
		sec.Drills = append(sec.Drills, dr)
	}
	return sec
}

// capacitySection: Q over "h1 ka chain" and the fleet it implies.
func capacitySection(series []LoadSeries, s Suite) CapSection {
	c := CapSection{Status: statusOK, Capacity: CapacityFrom(series, "h1", "ka", "chain", s.Target)}
	if c.Capacity.Lowest == 0 {
		c.Status = "not run: no h1 ka chain load series"
	}
	// Q = 0 (even the lowest rate missed the target) is a result, not a
	// failure of the section: the sizing then says why it has no answer.
	sz, err := SizingFor(s.TotalRPS, s.Regions, s.Lost, s.Headroom, c.Capacity.Q)
	if err != nil {
		c.SizingErr = err.Error()
		return c
	}
	c.Sizing = &sz
	return c
}
