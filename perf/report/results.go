package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SchemaVersion names results.json's layout; bump it on any incompatible change
// (perf/README.md, "results.json").
const SchemaVersion = "rampart-perf-results/1"

// Results is results.json.
type Results struct {
	Schema    string      `json:"schema"`
	Generated string      `json:"generated"` // RFC 3339, UTC
	Suite     string      `json:"suite"`     // "quick" or "full"
	Commit    string      `json:"commit"`
	Host      string      `json:"host"`
	Config    Config      `json:"config"`
	Load      LoadSection `json:"load"`
	XDP       XDPSection  `json:"xdp"`
	Routes    RouteSect   `json:"routes"`
	Swap      SwapSection `json:"swap"`
	Lab       LabSection  `json:"lab"`
	Capacity  CapSection  `json:"capacity"`
	Compare   CmpSection  `json:"comparison"`
	// Took is each section's run time in seconds ("load", "xdp", …, "total").
	Took map[string]float64 `json:"took_s,omitempty"`
}

// Config is what the suite was asked to do.
type Config struct {
	Protos      []string  `json:"protos"`
	Modes       []string  `json:"modes"`
	Rates       []float64 `json:"rates"`     // keep-alive
	NewRates    []float64 `json:"new_rates"` // a new connection per request
	Rounds      int       `json:"rounds"`
	Duration    string    `json:"duration"`
	Pin         bool      `json:"pin"`
	TargetP99ms float64   `json:"target_p99_ms"`
	Headroom    float64   `json:"headroom"`
	TotalRPS    float64   `json:"total_rps"`
	Regions     int       `json:"regions"`
	RegionsLost int       `json:"regions_lost"`
}

// Status values of a section: "ok", or "not run: <why>", or "failed: <error>".
const statusOK = "ok"

// LoadSection: the open-loop proxy runs.
type LoadSection struct {
	Status  string       `json:"status"`
	Command string       `json:"command"`
	Series  []LoadSeries `json:"series"`
	Runs    []Run        `json:"runs"`
}

// Run is one timed load run of compare.sh (a line of its runs.tsv).
type Run struct {
	Proto       string  `json:"proto"` // h1, h2, h3
	Mode        string  `json:"mode"`  // ka (keep-alive), new (a new connection per request)
	Rate        float64 `json:"rate"`  // offered req/s
	Round       int     `json:"round"`
	Proxy       string  `json:"proxy"` // rampart, chain, nginx, haproxy, or any other variant compare.sh runs
	Tool        string  `json:"tool"`
	WallS       float64 `json:"wall_s"`
	ProxyCPU    float64 `json:"proxy_cpu_s"`
	LoadCPU     float64 `json:"load_cpu_s"`
	UpstreamCPU float64 `json:"upstream_cpu_s"`
	OtherCPU    float64 `json:"other_cpu_s"`
	Out         ToolOut `json:"out"`
}

// LoadSeries aggregates the rounds of one proto/mode/proxy/rate.
type LoadSeries struct {
	Proto     string   `json:"proto"`
	Mode      string   `json:"mode"`
	Proxy     string   `json:"proxy"`
	Rate      float64  `json:"rate"`
	ReqPerCPU Spread   `json:"req_per_cpu_s"` // requests per proxy CPU-second
	P50ms     Spread   `json:"p50_ms"`
	P99ms     Spread   `json:"p99_ms"`
	Achieved  Spread   `json:"achieved_rps"`
	Failed    int64    `json:"failed"` // non-2xx + errors + overload, all rounds
	CPU       CPUSplit `json:"cpu_us_per_req"`
}

// CPUSplit is CPU µs per completed request, medians over the rounds.
type CPUSplit struct {
	Load     float64 `json:"load"`
	Proxy    float64 `json:"proxy"`
	Upstream float64 `json:"upstream"`
	Other    float64 `json:"other"`
}

// XDPSection: bpf's BenchmarkXDP and BenchmarkVethFlood.
type XDPSection struct {
	Status      string    `json:"status"`
	FloodStatus string    `json:"flood_status"`
	Paths       []XDPPath `json:"paths"`
	Flood       []Flood   `json:"flood"`
	Command     string    `json:"command"`
}

type XDPPath struct {
	Name         string  `json:"name"`
	NS           float64 `json:"ns_per_pkt"`
	BareNS       float64 `json:"bare_ns_per_pkt"`
	XBare        float64 `json:"x_bare"`
	KernelNS     float64 `json:"kernel_ns_per_pkt"`
	KernelBareNS float64 `json:"kernel_bare_ns_per_pkt"`
}

type Flood struct {
	Name          string  `json:"name"`
	DropsPerS     float64 `json:"drops_per_s"`
	DropsPerSCore float64 `json:"drops_per_s_per_busy_core"`
	XDPNSPkt      float64 `json:"xdp_ns_per_pkt"`
}

// RouteSect: l7/route's lookup and compile benchmarks.
type RouteSect struct {
	Status  string       `json:"status"`
	Items   []RouteBench `json:"items"`
	Command string       `json:"command"`
}

type RouteBench struct {
	Name     string  `json:"name"` // e.g. "lookup", "compile"
	Routes   int     `json:"routes"`
	NSPerOp  float64 `json:"ns_per_op"`
	Allocs   float64 `json:"allocs_per_op"`
	Bytes    float64 `json:"bytes_per_op"`
	HeapByte float64 `json:"heap_bytes,omitempty"`
}

// SwapSection: l7/proxy's TestSnapshotSwapUnderLoad.
type SwapSection struct {
	Status  string `json:"status"`
	SwapOut `json:"result"`
	Command string `json:"command"`
}

// LabSection: lab drills' FIGURE lines (PERF_LAB=1).
type LabSection struct {
	Status string  `json:"status"`
	Drills []Drill `json:"drills"`
}

type Drill struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Figures []Figure `json:"figures"`
}

// CapSection: Q and the fleet sizing.
type CapSection struct {
	Status    string   `json:"status"`
	Capacity  Capacity `json:"q"`
	Sizing    *Sizing  `json:"sizing,omitempty"`
	SizingErr string   `json:"sizing_error,omitempty"`
}

// CmpSection: the change against a previous results.json.
type CmpSection struct {
	Status   string  `json:"status"`
	Baseline string  `json:"baseline"`
	Rows     []Delta `json:"rows"`
}

type Delta struct {
	Key       string  `json:"key"`
	Old       float64 `json:"old"`
	New       float64 `json:"new"`
	ChangePct float64 `json:"change_pct"`
}

// ReadRuns reads compare.sh's runs.tsv (RUNS_DIR) and the tool output file each
// line names (relative to the file's directory). Lines that fail to parse are
// reported together; the good ones are kept.
//
//	proto mode rate round proxy tool wall_s proxy_ticks load_ticks upstream_ticks other_ticks hz out
func ReadRuns(path string) ([]Run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	dir := filepath.Dir(path)
	runs, errs := parseRunsTSV(string(data), func(name string) (string, error) {
		if filepath.IsAbs(name) || strings.Contains(name, "..") {
			return "", fmt.Errorf("output file %q: want a name inside %s", name, dir)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		return string(b), err
	})
	return runs, errs
}

// parseRunsTSV parses runs.tsv; read returns a run's tool output by file name.
func parseRunsTSV(text string, read func(string) (string, error)) ([]Run, error) {
	var runs []Run
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(text))
	ln := 0
	for sc.Scan() {
		ln++
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "proto\t") || strings.HasPrefix(line, "#") {
			continue
		}
		r, err := parseRunLine(line, read)
		if err != nil {
			errs = append(errs, fmt.Errorf("runs line %d: %w", ln, err))
			continue
		}
		runs = append(runs, r)
	}
	return runs, errors.Join(errs...)
}

func parseRunLine(line string, read func(string) (string, error)) (Run, error) {
	f := strings.Split(line, "\t")
	if len(f) != 13 {
		return Run{}, fmt.Errorf("%q: %d fields, want 13", line, len(f))
	}
	r := Run{Proto: f[0], Mode: f[1], Proxy: f[4], Tool: f[5]}
	for _, s := range []string{r.Proto, r.Mode, r.Proxy, r.Tool} {
		if s == "" || strings.ContainsAny(s, " /\"<>&") {
			return r, fmt.Errorf("%q: empty or bad name %q", line, s)
		}
	}
	var err error
	if r.Rate, err = finite(f[2]); err != nil {
		return r, fmt.Errorf("%q: rate: %w", line, err)
	}
	if r.Round, err = strconv.Atoi(f[3]); err != nil || r.Round < 1 {
		return r, fmt.Errorf("%q: round %q: want >= 1", line, f[3])
	}
	if r.WallS, err = finite(f[6]); err != nil || r.WallS == 0 {
		return r, fmt.Errorf("%q: wall time %q: want > 0", line, f[6])
	}
	var ticks [5]float64
	for i := range ticks {
		if ticks[i], err = strconv.ParseFloat(f[7+i], 64); err != nil || math.IsNaN(ticks[i]) || math.IsInf(ticks[i], 0) {
			return r, fmt.Errorf("%q: field %d %q: not a number", line, 8+i, f[7+i])
		}
	}
	hz := ticks[4]
	if hz <= 0 {
		return r, fmt.Errorf("%q: hz %q: want > 0", line, f[11])
	}
	r.ProxyCPU, r.LoadCPU, r.UpstreamCPU = max(ticks[0], 0)/hz, max(ticks[1], 0)/hz, max(ticks[2], 0)/hz
	r.OtherCPU = max(ticks[3], 0) / hz
	text, err := read(f[12])
	if err != nil {
		return r, fmt.Errorf("output of %s %s %s round %d: %w", r.Proto, r.Mode, r.Proxy, r.Round, err)
	}
	if r.Out, err = ParseTool(r.Tool, text); err != nil {
		return r, fmt.Errorf("%s %s %s round %d (%s): %w", r.Proto, r.Mode, r.Proxy, r.Round, f[12], err)
	}
	return r, nil
}

// Aggregate groups the runs by proto, mode, proxy and rate.
func Aggregate(runs []Run) []LoadSeries {
	type key struct {
		proto, mode, proxy string
		rate               float64
	}
	groups := map[key][]Run{}
	var keys []key
	for _, r := range runs {
		k := key{r.Proto, r.Mode, r.Proxy, r.Rate}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []LoadSeries
	for _, k := range keys {
		g := groups[k]
		s := LoadSeries{Proto: k.proto, Mode: k.mode, Proxy: k.proxy, Rate: k.rate}
		var eff, p50, p99, ach, cl, cp, cu, co []float64
		for _, r := range g {
			n := float64(r.Out.Requests)
			eff = append(eff, ratio(n, r.ProxyCPU))
			p50 = append(p50, r.Out.P50us/1000)
			p99 = append(p99, r.Out.P99us/1000)
			ach = append(ach, ratio(n, r.WallS))
			s.Failed += r.Out.Failed()
			cl = append(cl, 1e6*ratio(r.LoadCPU, n))
			cp = append(cp, 1e6*ratio(r.ProxyCPU, n))
			cu = append(cu, 1e6*ratio(r.UpstreamCPU, n))
			co = append(co, 1e6*ratio(r.OtherCPU, n))
		}
		s.ReqPerCPU, s.P50ms, s.P99ms, s.Achieved = SpreadOf(eff), SpreadOf(p50), SpreadOf(p99), SpreadOf(ach)
		s.CPU = CPUSplit{SpreadOf(cl).Median, SpreadOf(cp).Median, SpreadOf(cu).Median, SpreadOf(co).Median}
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b LoadSeries) int {
		return cmp.Or(cmp.Compare(protoOrder(a.Proto), protoOrder(b.Proto)), cmp.Compare(a.Proto, b.Proto),
			cmp.Compare(modeOrder(a.Mode), modeOrder(b.Mode)), cmp.Compare(a.Mode, b.Mode),
			cmp.Compare(proxyOrder(a.Proxy), proxyOrder(b.Proxy)), cmp.Compare(a.Proxy, b.Proxy),
			cmp.Compare(a.Rate, b.Rate))
	})
	return out
}

func protoOrder(p string) int { return indexOr([]string{"h1", "h2", "h3"}, p) }
func modeOrder(m string) int  { return indexOr([]string{"ka", "new"}, m) }

// proxyOrder: the known proxies first; any other variant (a new rampart
// server, say) after them, by name.
func proxyOrder(p string) int { return indexOr(knownProxies, p) }

// knownProxies are the proxies compare.sh runs today, in the report's order.
var knownProxies = []string{"rampart", "chain", "nginx", "haproxy", "rampart-h2"}

func indexOr(list []string, v string) int {
	if i := slices.Index(list, v); i >= 0 {
		return i
	}
	return len(list)
}

// CapacityFrom computes Q over the series of proto/mode/proxy.
func CapacityFrom(series []LoadSeries, proto, mode, proxy string, target float64) Capacity {
	var pts []Point
	for _, s := range series {
		if s.Proto == proto && s.Mode == mode && s.Proxy == proxy {
			pts = append(pts, Point{Rate: s.Rate, P99ms: s.P99ms.Median, Failed: s.Failed, Delivered: ratio(s.Achieved.Median, s.Rate)})
		}
	}
	return CapacityOf(proto+" "+mode+" "+proxy, target, pts)
}

// Figures flattens the results into named figures, for the comparison.
func (r *Results) Figures() map[string]float64 {
	f := map[string]float64{}
	for _, s := range r.Load.Series {
		k := fmt.Sprintf("%s %s %s @%s", s.Proto, s.Mode, s.Proxy, num(s.Rate))
		f[k+" req/cpu-s"] = s.ReqPerCPU.Median
		f[k+" p99 ms"] = s.P99ms.Median
	}
	for _, p := range r.XDP.Paths {
		f["xdp "+p.Name+" ns/pkt"] = p.NS
	}
	for _, fl := range r.XDP.Flood {
		f["flood "+fl.Name+" drops/s"] = fl.DropsPerS
	}
	for _, b := range r.Routes.Items {
		f[fmt.Sprintf("route %s %s ns/op", b.Name, num(float64(b.Routes)))] = b.NSPerOp
	}
	if r.Capacity.Capacity.Q > 0 {
		f["Q req/s"] = r.Capacity.Capacity.Q
	}
	return f
}

// CompareWith lists every figure present in both, by key.
func CompareWith(old, cur map[string]float64) []Delta {
	var out []Delta
	for k, n := range cur {
		o, ok := old[k]
		if !ok {
			continue
		}
		out = append(out, Delta{Key: k, Old: o, New: n, ChangePct: 100 * ratio(n-o, o)})
	}
	slices.SortFunc(out, func(a, b Delta) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// LoadBaseline reads a previous results.json; any other schema is refused.
func LoadBaseline(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("baseline %s: schema %q, want %q", path, r.Schema, SchemaVersion)
	}
	return &r, nil
}
