// Command report runs rampart's perf suite and writes perf/out/report.html
// and perf/out/results.json (perf/README.md, "make perf").
//
//	go run ./perf/report -suite quick            # make perf-quick
//	go run ./perf/report -suite full             # make perf (PERF_LAB=1: with the lab drills)
//	go run ./perf/report -runs DIR/runs.tsv      # only the load section, from a compare.sh RUNS_DIR
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	suite    Suite
	out      string
	root     string
	runs     string
	baseline string
}

func parseArgs(args []string, env func(string) string) (options, error) {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	name := fs.String("suite", "quick", "quick (make perf-quick) or full (make perf)")
	o := options{}
	fs.StringVar(&o.out, "out", "perf/out", "output directory")
	fs.StringVar(&o.root, "root", ".", "repository root")
	fs.StringVar(&o.runs, "runs", "", "only read this runs.tsv (a compare.sh RUNS_DIR) instead of running the suite")
	fs.StringVar(&o.baseline, "baseline", "", "previous results.json to compare with (default: OUT/results.json when present)")
	rates := fs.String("rates", "", "offered open-loop rates (keep-alive), req/s, comma-separated (default: the suite's)")
	newRates := fs.String("new-rates", "", "the same for a new connection per request (default: the suite's)")
	modes := fs.String("modes", "", "ka, new or ka,new (default: the suite's)")
	protos := fs.String("protos", "", "h1, h2, h3: one or all three (default: the suite's)")
	rounds := fs.Int("rounds", 0, "interleaved rounds (default: the suite's)")
	duration := fs.String("duration", "", "each timed load run, e.g. 5s (default: the suite's)")
	target := fs.Float64("p99-target", 0, "p99 target in ms for Q (default 50)")
	headroom := fs.Float64("headroom", -1, "share of Q kept free in the sizing (default 0.30)")
	total := fs.Float64("total", 0, "fleet-wide req/s to size for (default 500000)")
	regions := fs.Int("regions", 0, "regions (default 3)")
	lost := fs.Int("regions-lost", -1, "regions that may be lost (default 1)")
	lab := fs.Bool("lab", env("PERF_LAB") == "1", "run the lab drills (default: PERF_LAB=1)")
	sections := fs.String("sections", "", "run only these sections, comma-separated: load, xdp, routes, swap, lab (default: all)")
	drills := fs.String("lab-drills", "", "the lab drills, comma-separated (default failover,bad-rollout)")
	pin := fs.Bool("pin", true, "pin proxies to one CPU and the load generator and upstream to another")
	haproxy := fs.Bool("haproxy", true, "load haproxy too")
	h2variant := fs.Bool("h2-variant", true, "load rampart-h2 (h2_server: rampart) in the h2 rounds too")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch *name {
	case "quick":
		o.suite = Quick()
	case "full":
		o.suite = Full()
	default:
		return o, fmt.Errorf("-suite %q: want quick or full", *name)
	}
	s := &o.suite
	s.Lab, s.Pin, s.Haproxy, s.H2Variant = *lab, *pin, *haproxy, *h2variant
	if *sections != "" {
		s.Sections = strings.Split(*sections, ",")
		for _, x := range s.Sections {
			if !slices.Contains([]string{"load", "xdp", "routes", "swap", "lab"}, x) {
				return o, fmt.Errorf("-sections: %q is not load, xdp, routes, swap or lab", x)
			}
		}
	}
	if *drills != "" {
		s.LabDrills = strings.Split(*drills, ",")
		for _, d := range s.LabDrills {
			if d == "" || strings.ContainsAny(d, " /\\") {
				return o, fmt.Errorf("-lab-drills: %q is not a drill name", d)
			}
		}
	}
	for _, rf := range []struct {
		name string
		v    string
		dst  *[]float64
	}{{"-rates", *rates, &s.Rates}, {"-new-rates", *newRates, &s.NewRates}} {
		if rf.v == "" {
			continue
		}
		*rf.dst = nil
		for _, f := range strings.Split(rf.v, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(v >= 1 && v <= 1e6) || v != float64(int64(v)) {
				return o, fmt.Errorf("%s: %q is not a whole number of req/s in 1..1000000", rf.name, f)
			}
			*rf.dst = append(*rf.dst, v)
		}
	}
	if *modes != "" {
		s.Modes = strings.Split(*modes, ",")
		for _, m := range s.Modes {
			if m != "ka" && m != "new" {
				return o, fmt.Errorf("-modes: %q is not ka or new", m)
			}
		}
	}
	if *protos != "" {
		s.Protos = strings.Split(*protos, ",")
		if p := s.Protos; !(len(p) == 1 && (p[0] == "h1" || p[0] == "h2" || p[0] == "h3")) && *protos != "h1,h2,h3" {
			return o, fmt.Errorf("-protos %q: want h1, h2, h3 or h1,h2,h3", *protos)
		}
	}
	if *rounds != 0 {
		if *rounds < 1 || *rounds > 50 {
			return o, fmt.Errorf("-rounds %d: want 1..50", *rounds)
		}
		s.Rounds = *rounds
	}
	if *duration != "" {
		d, err := time.ParseDuration(*duration)
		if err != nil || d < 100*time.Millisecond || d > time.Hour {
			return o, fmt.Errorf("-duration %q: want 100ms..1h", *duration)
		}
		s.Duration = *duration
	}
	if *target != 0 {
		if !(*target > 0 && *target < 1e6) {
			return o, fmt.Errorf("-p99-target %v: want > 0 ms", *target)
		}
		s.Target = *target
	}
	if *headroom != -1 {
		s.Headroom = *headroom
	}
	if *total != 0 {
		s.TotalRPS = *total
	}
	if *regions != 0 {
		s.Regions = *regions
	}
	if *lost != -1 {
		s.Lost = *lost
	}
	// the sizing refuses what gives no answer; check it before a long run
	if _, err := SizingFor(s.TotalRPS, s.Regions, s.Lost, s.Headroom, 1); err != nil {
		return o, err
	}
	return o, nil
}

func main() {
	o, err := parseArgs(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf/report:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := build(ctx, o, func(f string, a ...any) { fmt.Fprintf(os.Stderr, "perf/report: "+f+"\n", a...) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "perf/report:", err)
		os.Exit(1)
	}
	fmt.Print(Summary(res))
	fmt.Printf("report: %s\n", filepath.Join(o.out, "report.html"))
}

// build runs the suite (or reads o.runs), compares with the baseline and
// writes results.json and report.html.
func build(ctx context.Context, o options, logf func(string, ...any)) (*Results, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	basePath := o.baseline
	if basePath == "" {
		basePath = filepath.Join(o.out, "results.json")
	}
	base, baseErr := LoadBaseline(basePath)
	var res Results
	if o.runs != "" {
		res = fromRuns(o.runs, o.suite)
	} else {
		r := &Runner{Root: o.root, Out: o.out, Run: execRun, Log: logf}
		res = r.Execute(ctx, o.suite)
	}
	res.Compare = compareSection(&res, base, basePath, baseErr)
	return &res, write(o.out, &res)
}

// fromRuns fills only the load and capacity sections from a runs file.
func fromRuns(path string, s Suite) Results {
	rs, err := ReadRuns(path)
	res := Results{Schema: SchemaVersion, Generated: time.Now().UTC().Format(time.RFC3339), Suite: s.Name,
		Commit: "unknown (read from a runs file)", Host: "unknown (read from a runs file)"}
	res.Config = Config{Protos: s.Protos, Modes: s.Modes, Rates: s.Rates, NewRates: s.NewRates, Rounds: s.Rounds, Duration: s.Duration,
		Pin: s.Pin, TargetP99ms: s.Target, Headroom: s.Headroom, TotalRPS: s.TotalRPS, Regions: s.Regions, RegionsLost: s.Lost}
	res.Load = LoadSection{Status: statusOK, Series: Aggregate(rs), Runs: rs, Command: "runs file " + path}
	if err != nil {
		res.Load.Status = failed(err)
	}
	why := "not run: -runs reads the load section only"
	res.XDP = XDPSection{Status: why, FloodStatus: why}
	res.Routes, res.Swap, res.Lab = RouteSect{Status: why}, SwapSection{Status: why}, LabSection{Status: why}
	res.Capacity = capacitySection(res.Load.Series, s)
	return res
}

func compareSection(res *Results, base *Results, path string, err error) CmpSection {
	switch {
	case err != nil && errors.Is(err, os.ErrNotExist):
		return CmpSection{Status: "not run: no previous results at " + path}
	case err != nil:
		return CmpSection{Status: failed(err), Baseline: path}
	}
	c := CmpSection{Status: statusOK, Baseline: path + " (" + base.Generated + ", " + base.Commit + ", suite " + base.Suite + ")",
		Rows: CompareWith(base.Figures(), res.Figures())}
	if base.Suite != res.Suite {
		c.Status = fmt.Sprintf("ok, but the baseline is the %s suite and this the %s one: fewer figures match, and those ran shorter or longer", base.Suite, res.Suite)
	}
	return c
}

// write stores results.json and report.html.
func write(out string, res *Results) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var h bytes.Buffer
	if err := RenderHTML(&h, res, MakePlots(res)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "report.html"), h.Bytes(), 0o644)
}

// Summary is the text printed at the end: the capacity table and each
// section's status.
func Summary(r *Results) string {
	var b strings.Builder
	c := r.Capacity.Capacity
	fmt.Fprintf(&b, "capacity: Q = %s req/s per instance (%s; series %s, p99 target %s ms)", num(c.Q), c.Bound, c.Series, num(c.TargetP99ms))
	if c.Why != "" {
		fmt.Fprintf(&b, "; first miss: %s", c.Why)
	}
	b.WriteString("\n")
	if s := r.Capacity.Sizing; s != nil {
		for _, st := range s.Steps {
			fmt.Fprintf(&b, "  %s\n", st)
		}
	} else {
		fmt.Fprintf(&b, "  sizing: %s\n", r.Capacity.SizingErr)
	}
	fmt.Fprintf(&b, "%-5s %-4s %-10s %7s %12s %10s %10s %7s\n", "proto", "mode", "proxy", "rate", "req/cpu-s", "p50 ms", "p99 ms", "failed")
	for _, s := range r.Load.Series {
		fmt.Fprintf(&b, "%-5s %-4s %-10s %7s %12s %10.1f %10.1f %7d\n", s.Proto, s.Mode, s.Proxy, num(s.Rate), num(s.ReqPerCPU.Median), s.P50ms.Median, s.P99ms.Median, s.Failed)
	}
	for _, st := range []struct{ name, status string }{{"load", r.Load.Status}, {"xdp", r.XDP.Status}, {"flood", r.XDP.FloodStatus},
		{"routes", r.Routes.Status}, {"swap", r.Swap.Status}, {"lab", r.Lab.Status}, {"capacity", r.Capacity.Status}, {"comparison", r.Compare.Status}} {
		fmt.Fprintf(&b, "%-10s %s\n", st.name+":", st.status)
	}
	return b.String()
}
