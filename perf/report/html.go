package main

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// page is what the template sees.
type page struct {
	R     *Results
	P     Plots
	Quick bool
}

var funcs = template.FuncMap{
	"num": num,
	"f1":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":  func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"spread": func(s Spread, digits int) string {
		if s.N == 0 {
			return "–"
		}
		f := func(v float64) string {
			if digits == 0 {
				return num(v)
			}
			return fmt.Sprintf("%.*f", digits, v)
		}
		if s.N == 1 {
			return f(s.Median)
		}
		return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
	},
	"ok":      func(status string) bool { return status == statusOK },
	"notrun":  func(status string) bool { return strings.HasPrefix(status, "not run") },
	"pct":     func(v float64) string { return fmt.Sprintf("%+.1f %%", v) },
	"modeOf":  modeName,
	"rateOf":  func(v float64) string { return num(v) },
	"join":    strings.Join,
	"rates":   fmtRates,
	"inc":     func(i int) int { return i + 1 },
	"hasPlot": func(h template.HTML) bool { return h != "" },
	"mulPct":  func(v float64) float64 { return 100 * v },
	"float":   func(v int) float64 { return float64(v) },
}

// RenderHTML writes report.html: self-contained, every plot an inline SVG.
func RenderHTML(w io.Writer, res *Results, ps Plots) error {
	if err := reportTmpl.Execute(w, page{R: res, P: ps, Quick: res.Suite == "quick"}); err != nil {
		return fmt.Errorf("report.html: %w", err)
	}
	return nil
}

var reportTmpl = template.Must(template.New("report").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rampart perf report ({{.R.Suite}}, {{.R.Generated}})</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th:first-child, td:first-child, td.l { text-align: left; }
.status { font-weight: bold; }
.bad { color: #b00; }
.muted { color: #777; }
code, pre { background: #f4f4f4; padding: 1px 4px; }
figure { display: inline-block; margin: .5em 1em .5em 0; }
</style>
</head>
<body>
<h1>rampart perf report</h1>
<p id="meta">suite <b>{{.R.Suite}}</b>, {{.R.Generated}}, commit <code>{{.R.Commit}}</code>, {{.R.Host}}.
Schema <code>{{.R.Schema}}</code> (results.json next to this file).
Load: protocols {{join .R.Config.Protos ", "}}, modes {{join .R.Config.Modes ", "}}, offered rates {{join (rates .R.Config.Rates) ", "}} req/s (new connections: {{join (rates .R.Config.NewRates) ", "}}),
{{.R.Config.Rounds}} interleaved round(s) of {{.R.Config.Duration}}, {{if .R.Config.Pin}}proxies pinned to one CPU, load generator and upstream to another{{else}}not pinned{{end}}.
Figures: medians over the rounds, the min–max of the rounds in brackets.{{if .Quick}} <b>Quick suite</b>: one short round per point; the numbers are for the report's shape, not for decisions.{{end}}</p>

<h2 id="capacity">Capacity Q and the fleet</h2>
{{with .R.Capacity}}
<p>Q = the highest offered open-loop rate of <b>{{.Capacity.Series}}</b> whose median p99 stays under {{num .Capacity.TargetP99ms}} ms, with no failed request and ≥ 95 % of the rate delivered.</p>
<table><tr><th>series</th><th>p99 target</th><th>Q (req/s per instance)</th><th>bound</th><th>first miss</th></tr>
<tr><td>{{.Capacity.Series}}</td><td>{{num .Capacity.TargetP99ms}} ms</td><td><b>{{num .Capacity.Q}}</b></td><td>{{.Capacity.Bound}}</td><td class="l">{{or .Capacity.Why "–"}}</td></tr></table>
{{if .Sizing}}
<p>Fleet for {{num .Sizing.TotalRPS}} req/s over {{.Sizing.Regions}} regions, {{.Sizing.RegionsLost}} lost, {{printf "%.0f" (mulPct .Sizing.Headroom)}} % headroom, N+1 per region:</p>
<pre id="sizing">per-region load   = total / (regions − regions lost)
usable / instance = Q × (1 − headroom)
per region        = ceil(per-region load / usable) + 1
fleet             = regions × per region

{{range .Sizing.Steps}}{{.}}
{{end}}</pre>
<table><tr><th>per-region load</th><th>usable per instance</th><th>instances per region</th><th>fleet</th></tr>
<tr><td>{{num .Sizing.PerRegionRPS}} req/s</td><td>{{num .Sizing.UsablePerInstance}} req/s</td><td>{{.Sizing.PerRegion}}</td><td><b>{{.Sizing.Fleet}}</b></td></tr></table>
{{else}}<p class="status bad" id="no-sizing">no sizing: {{.SizingErr}}</p>{{end}}
{{end}}

<h2 id="load">Proxies under open-loop load</h2>
<p class="status{{if not (ok .R.Load.Status)}} bad{{end}}">status: {{.R.Load.Status}}</p>
{{if .R.Load.Command}}<p class="muted">command: <code>{{.R.Load.Command}}</code></p>{{end}}
{{range .P.Load}}
<h3>{{.Proto}}, {{modeOf .Mode}}</h3>
{{if hasPlot .P99}}<figure>{{.P99}}</figure>{{end}}{{if hasPlot .Eff}}<figure>{{.Eff}}</figure>{{end}}{{if hasPlot .CPU}}<figure>{{.CPU}}</figure>{{end}}
{{end}}
{{if .P.Errors}}<ul class="bad">{{range .P.Errors}}<li>plot: {{.}}</li>{{end}}</ul>{{end}}
<table id="series"><tr><th>proto</th><th>mode</th><th>proxy</th><th>offered</th><th>achieved req/s</th><th>req / proxy CPU-s</th><th>p50 ms</th><th>p99 ms</th><th>failed</th>
<th>CPU µs/req: proxy</th><th>load gen.</th><th>upstream</th><th>other</th></tr>
{{range .R.Load.Series}}<tr><td>{{.Proto}}</td><td class="l">{{.Mode}}</td><td class="l">{{.Proxy}}</td><td>{{rateOf .Rate}}</td><td>{{spread .Achieved 0}}</td><td>{{spread .ReqPerCPU 0}}</td>
<td>{{spread .P50ms 1}}</td><td>{{spread .P99ms 1}}</td><td>{{.Failed}}</td><td>{{num .CPU.Proxy}}</td><td>{{num .CPU.Load}}</td><td>{{num .CPU.Upstream}}</td><td>{{num .CPU.Other}}</td></tr>
{{else}}<tr><td colspan="13" class="l">no load series</td></tr>{{end}}
</table>
<p class="muted">CPU from /proc/PID/stat utime+stime deltas around each run: the proxy's processes, the load generator, the upstream; "other" is the rest of the machine's busy time (a contamination check).</p>

<h2 id="xdp">XDP: ns per packet and flood drops</h2>
{{with .R.XDP}}
<p class="status{{if not (ok .Status)}} bad{{end}}">status: {{.Status}}; flood: {{.FloodStatus}}</p>
<p class="muted">command: <code>{{.Command}}</code></p>
{{if hasPlot $.P.XDP}}<figure>{{$.P.XDP}}</figure>{{end}}
<table id="xdp-paths"><tr><th>path</th><th>ns/pkt</th><th>bare ns/pkt</th><th>× bare</th><th>kernel ns/pkt</th><th>kernel bare</th></tr>
{{range .Paths}}<tr><td>{{.Name}}</td><td>{{f2 .NS}}</td><td>{{f2 .BareNS}}</td><td>{{f2 .XBare}}</td><td>{{f1 .KernelNS}}</td><td>{{f1 .KernelBareNS}}</td></tr>
{{else}}<tr><td colspan="6" class="l">no XDP results</td></tr>{{end}}</table>
<table id="flood"><tr><th>flood (veth, native XDP)</th><th>drops/s</th><th>drops/s per busy core</th><th>XDP ns/pkt</th></tr>
{{range .Flood}}<tr><td>{{.Name}}</td><td>{{num .DropsPerS}}</td><td>{{num .DropsPerSCore}}</td><td>{{f1 .XDPNSPkt}}</td></tr>
{{else}}<tr><td colspan="4" class="l">no flood results</td></tr>{{end}}</table>
{{end}}

<h2 id="routes">Route match and compile</h2>
{{with .R.Routes}}
<p class="status{{if not (ok .Status)}} bad{{end}}">status: {{.Status}}</p>
<p class="muted">command: <code>{{.Command}}</code></p>
{{if hasPlot $.P.Routes}}<figure>{{$.P.Routes}}</figure>{{end}}
<table id="route-items"><tr><th>what</th><th>routes</th><th>ns/op</th><th>allocs/op</th><th>B/op</th><th>heap bytes</th></tr>
{{range .Items}}<tr><td>{{.Name}}</td><td>{{num (float .Routes)}}</td><td>{{num .NSPerOp}}</td><td>{{num .Allocs}}</td><td>{{num .Bytes}}</td><td>{{if .HeapByte}}{{num .HeapByte}}{{else}}–{{end}}</td></tr>
{{else}}<tr><td colspan="6" class="l">no route results</td></tr>{{end}}</table>
{{end}}

<h2 id="swap">Snapshot swap under load</h2>
{{with .R.Swap}}
<p class="status{{if not (ok .Status)}} bad{{end}}">status: {{.Status}}</p>
<p class="muted">command: <code>{{.Command}}</code></p>
<table><tr><th>requests</th><th>before the swap</th><th>errors (must be 0)</th></tr>
<tr><td>{{.Requests}}</td><td>{{.Before}}</td><td><b>{{.Errors}}</b></td></tr></table>
{{end}}

<h2 id="lab">Lab: publish → active and the BGP failover error window</h2>
{{with .R.Lab}}
<p class="status{{if not (or (ok .Status) (notrun .Status))}} bad{{end}}">status: {{.Status}}</p>
{{range .Drills}}<h3>drill {{.Name}} ({{.Status}})</h3>
<table><tr><th>figure</th><th>value</th></tr>{{range .Figures}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>{{end}}</table>
{{end}}
{{end}}

<h2 id="comparison">Comparison with the previous report</h2>
{{with .R.Compare}}
<p class="status">status: {{.Status}}{{if .Baseline}} (baseline {{.Baseline}}){{end}}</p>
{{if .Rows}}<table id="compare"><tr><th>figure</th><th>before</th><th>now</th><th>change</th></tr>
{{range .Rows}}<tr><td>{{.Key}}</td><td>{{num .Old}}</td><td>{{num .New}}</td><td>{{pct .ChangePct}}</td></tr>
{{end}}</table>{{end}}
{{end}}

<h2 id="reproduce">How to reproduce</h2>
<pre>make perf-quick     # this suite, ~2 minutes: perf/out/report.html, perf/out/results.json
make perf           # the full suite
make perf PERF_LAB=1   # with the lab drills (root)</pre>
<p class="muted">Raw outputs of every run and benchmark: perf/out/runs/ and perf/out/logs/. perf/README.md explains each section.</p>
</body>
</html>
`))
