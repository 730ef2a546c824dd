package main

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plots are the report's figures, each an inline SVG drawn by gonum/plot.
type Plots struct {
	Load    []LoadPlot    // one per protocol and mode
	XDP     template.HTML // ns/packet per path vs the bare program
	Routes  template.HTML // lookup and compile times
	Errors  []string      // a plot that could not be drawn (the report says so)
	Missing bool          // no load series at all
}

// LoadPlot: the p99 and req/CPU-s curves and the CPU split of one protocol and mode.
type LoadPlot struct {
	Proto, Mode string
	P99         template.HTML
	Eff         template.HTML
	CPU         template.HTML
}

// svgOf renders p as an SVG element (the XML prelude dropped, so it can sit
// inside HTML).
func svgOf(p *plot.Plot, w, h vg.Length) (template.HTML, error) {
	wt, err := p.WriterTo(w, h, "svg")
	if err != nil {
		return "", fmt.Errorf("svg: %w", err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return "", fmt.Errorf("svg: %w", err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return template.HTML(s), nil //nolint:gosec // made by gonum/plot from numbers and our labels, not from input text
}

// proxyColorIndex gives every proxy a fixed colour across plots.
func proxyColorIndex(name string, names []string) int {
	if i := proxyOrder(name); i < len(knownProxies) {
		return i
	}
	return len(knownProxies) + slices.Index(names, name)
}

// modeName spells a mode for a title.
func modeName(m string) string {
	switch m {
	case "ka":
		return "keep-alive"
	case "new":
		return "new connection per request"
	}
	return m
}

// MakePlots draws every figure it has data for.
func MakePlots(res *Results) Plots {
	var ps Plots
	type pm struct{ proto, mode string }
	var keys []pm
	for _, s := range res.Load.Series {
		k := pm{s.Proto, s.Mode}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	ps.Missing = len(keys) == 0
	for _, k := range keys {
		var ss []LoadSeries
		for _, s := range res.Load.Series {
			if s.Proto == k.proto && s.Mode == k.mode {
				ss = append(ss, s)
			}
		}
		lp := LoadPlot{Proto: k.proto, Mode: k.mode}
		var err error
		title := fmt.Sprintf("%s, %s", k.proto, modeName(k.mode))
		if lp.P99, err = curvePlot(ss, title+": p99 latency", "p99 (ms, from the due time)", func(s LoadSeries) Spread { return s.P99ms }, res.Config.TargetP99ms); err != nil {
			ps.Errors = append(ps.Errors, title+" p99: "+err.Error())
		}
		if lp.Eff, err = curvePlot(ss, title+": requests per proxy CPU-second", "req / proxy CPU-s", func(s LoadSeries) Spread { return s.ReqPerCPU }, 0); err != nil {
			ps.Errors = append(ps.Errors, title+" req/CPU-s: "+err.Error())
		}
		if lp.CPU, err = cpuPlot(ss, title); err != nil {
			ps.Errors = append(ps.Errors, title+" CPU split: "+err.Error())
		}
		ps.Load = append(ps.Load, lp)
	}
	var err error
	if len(res.XDP.Paths) > 0 {
		if ps.XDP, err = xdpPlot(res.XDP.Paths); err != nil {
			ps.Errors = append(ps.Errors, "XDP: "+err.Error())
		}
	}
	if len(res.Routes.Items) > 0 {
		if ps.Routes, err = routePlot(res.Routes.Items); err != nil {
			ps.Errors = append(ps.Errors, "routes: "+err.Error())
		}
	}
	return ps
}

// curvePlot: the figure against the offered rate, one line per proxy, the
// min–max of the rounds as error bars; target > 0 draws it as a dashed line.
func curvePlot(ss []LoadSeries, title, ylabel string, f func(LoadSeries) Spread, target float64) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "offered load (req/s)"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	var names []string
	for _, s := range ss {
		if !slices.Contains(names, s.Proxy) {
			names = append(names, s.Proxy)
		}
	}
	maxRate := 0.0
	for _, name := range names {
		var xy plotter.XYs
		var errs plotter.YErrors
		for _, s := range ss {
			if s.Proxy != name {
				continue
			}
			v := f(s)
			xy = append(xy, plotter.XY{X: s.Rate, Y: v.Median})
			errs = append(errs, struct{ Low, High float64 }{v.Median - v.Min, v.Max - v.Median})
			maxRate = math.Max(maxRate, s.Rate)
		}
		c := plotutil.Color(proxyColorIndex(name, names))
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		line.Color, points.Color = c, c
		points.Shape = plotutil.Shape(proxyColorIndex(name, names))
		eb := &plotter.YErrorBars{XYs: xy, YErrors: errs, LineStyle: line.LineStyle, CapWidth: vg.Points(4)}
		eb.LineStyle.Width = vg.Points(0.7)
		p.Add(line, points, eb)
		p.Legend.Add(name, line, points)
	}
	if target > 0 {
		t, err := plotter.NewLine(plotter.XYs{{X: 0, Y: target}, {X: math.Max(maxRate, 1), Y: target}})
		if err != nil {
			return "", err
		}
		t.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(t)
		p.Legend.Add(fmt.Sprintf("target %.0f ms", target), t)
	}
	p.Add(plotter.NewGrid())
	p.Y.Min, p.X.Min, p.X.Max = 0, 0, math.Max(maxRate, 1)*1.1
	p.Legend.Left = true
	return svgOf(p, 12*vg.Centimeter, 7.5*vg.Centimeter)
}

// cpuPlot: CPU µs per request at the highest offered rate, split between
// load generator, proxy and upstream, one stacked bar per proxy.
func cpuPlot(ss []LoadSeries, title string) (template.HTML, error) {
	top := 0.0
	for _, s := range ss {
		top = math.Max(top, s.Rate)
	}
	var labels []string
	var load, proxy, up plotter.Values
	for _, s := range ss {
		if s.Rate != top {
			continue
		}
		labels = append(labels, s.Proxy)
		load, proxy, up = append(load, s.CPU.Load), append(proxy, s.CPU.Proxy), append(up, s.CPU.Upstream)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: CPU per request at %s req/s", title, num(top))
	p.Y.Label.Text = "CPU µs per request"
	p.Legend.Top = true
	w := vg.Points(22)
	var prev *plotter.BarChart
	for i, part := range []struct {
		name string
		v    plotter.Values
	}{{"proxy", proxy}, {"load generator", load}, {"upstream", up}} {
		b, err := plotter.NewBarChart(part.v, w)
		if err != nil {
			return "", fmt.Errorf("%s: %w", part.name, err)
		}
		b.Color = plotutil.Color(i + 5)
		b.LineStyle.Width = 0
		if prev != nil {
			b.StackOn(prev)
		}
		prev = b
		p.Add(b)
		p.Legend.Add(part.name, b)
	}
	p.NominalX(labels...)
	tallest := 0.0
	for i := range proxy {
		tallest = math.Max(tallest, proxy[i]+load[i]+up[i])
	}
	p.Y.Min, p.Y.Max = 0, 1.35*math.Max(tallest, 1) // room for the legend above the bars
	return svgOf(p, 12*vg.Centimeter, 7.5*vg.Centimeter)
}

// xdpPlot: ns per packet of each path next to the bare program's.
func xdpPlot(paths []XDPPath) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = "XDP: ns per packet (BPF_PROG_TEST_RUN, thread CPU time)"
	p.X.Label.Text = "ns per packet"
	p.Legend.Top = true
	var names []string
	var ns, bare plotter.Values
	for _, x := range paths {
		names = append(names, x.Name)
		ns, bare = append(ns, x.NS), append(bare, x.BareNS)
	}
	w := vg.Points(8)
	a, err := plotter.NewBarChart(ns, w)
	if err != nil {
		return "", err
	}
	b, err := plotter.NewBarChart(bare, w)
	if err != nil {
		return "", err
	}
	a.Horizontal, b.Horizontal = true, true
	a.Color, b.Color = plotutil.Color(0), plotutil.Color(7)
	a.LineStyle.Width, b.LineStyle.Width = 0, 0
	a.Offset, b.Offset = w/2, -w/2
	p.Add(a, b)
	p.Legend.Add("rampart's program", a)
	p.Legend.Add("bare XDP_PASS", b)
	p.NominalY(names...)
	return svgOf(p, 16*vg.Centimeter, vg.Length(3+len(paths))*0.9*vg.Centimeter)
}

// routePlot: lookup ns/op and compile ms at each table size.
func routePlot(items []RouteBench) (template.HTML, error) {
	p := plot.New()
	p.Title.Text = "l7/route: lookup (ns) and compile (ms) by table size"
	p.Legend.Top = true
	var labels []string
	var lookup, compile plotter.Values
	sizes := map[int]bool{}
	for _, it := range items {
		if it.Name == "lookup" || it.Name == "compile" {
			sizes[it.Routes] = true
		}
	}
	var order []int
	for k := range sizes {
		order = append(order, k)
	}
	slices.Sort(order)
	for _, n := range order {
		labels = append(labels, num(float64(n))+" routes")
		var l, c float64
		for _, it := range items {
			if it.Routes == n && it.Name == "lookup" {
				l = it.NSPerOp
			}
			if it.Routes == n && it.Name == "compile" {
				c = it.NSPerOp / 1e6
			}
		}
		lookup, compile = append(lookup, l), append(compile, c)
	}
	if len(order) == 0 {
		return "", fmt.Errorf("no lookup or compile results")
	}
	w := vg.Points(18)
	a, err := plotter.NewBarChart(lookup, w)
	if err != nil {
		return "", err
	}
	b, err := plotter.NewBarChart(compile, w)
	if err != nil {
		return "", err
	}
	a.Color, b.Color = plotutil.Color(1), plotutil.Color(2)
	a.LineStyle.Width, b.LineStyle.Width = 0, 0
	a.Offset, b.Offset = -w/2, w/2
	p.Add(a, b)
	p.Legend.Add("lookup, ns per lookup", a)
	p.Legend.Add("compile, ms per table", b)
	p.NominalX(labels...)
	return svgOf(p, 12*vg.Centimeter, 7*vg.Centimeter)
}
