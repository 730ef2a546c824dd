package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Spread
	}{
		{nil, Spread{}},
		{[]float64{math.NaN(), math.Inf(1)}, Spread{}},
		{[]float64{3}, Spread{3, 3, 3, 1}},
		{[]float64{5, 1, 3}, Spread{3, 1, 5, 3}},
		{[]float64{4, 1, 3, 2}, Spread{2.5, 1, 4, 4}},
		{[]float64{2, math.NaN(), 1, 9}, Spread{2, 1, 9, 3}},
	} {
		if got := SpreadOf(tc.in); got != tc.want {
			t.Errorf("%v: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestCapacityOf(t *testing.T) {
	ok := func(rate, p99 float64) Point { return Point{Rate: rate, P99ms: p99, Delivered: 1} }
	for _, tc := range []struct {
		name  string
		pts   []Point
		q     float64
		bound string
		why   string
	}{
		{"none", nil, 0, "below", "no measured rates"},
		{"all under", []Point{ok(4000, 20), ok(1000, 2), ok(2000, 5)}, 4000, "at least", ""},
		{"p99 over at the top", []Point{ok(1000, 2), ok(2000, 5), ok(4000, 80)}, 2000, "exact", "4000 req/s: p99 80.0 ms >= 50 ms"},
		{"exactly at the target fails", []Point{ok(1000, 50)}, 0, "below", "1000 req/s: p99 50.0 ms"},
		{"errors", []Point{ok(1000, 2), {Rate: 2000, P99ms: 3, Failed: 4, Delivered: 1}}, 1000, "exact", "4 failed requests"},
		{"fell behind", []Point{ok(1000, 2), {Rate: 2000, P99ms: 3, Delivered: 0.8}}, 1000, "exact", "delivered 80 %"},
		// a lower rate that misses stops the search even if a higher one passes
		{"not monotonic", []Point{ok(1000, 2), ok(2000, 60), ok(4000, 10)}, 1000, "exact", "2000 req/s"},
	} {
		c := CapacityOf("h1 ka chain", 50, tc.pts)
		if c.Q != tc.q || c.Bound != tc.bound || !strings.Contains(c.Why, tc.why) || c.TargetP99ms != 50 {
			t.Errorf("%s: got %+v, want Q %v %s %q", tc.name, c, tc.q, tc.bound, tc.why)
		}
	}
}

func TestSizingFor(t *testing.T) {
	s, err := SizingFor(500_000, 3, 1, 0.30, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	// 250,000 per region / 7,000 usable = 35.7 → 36, +1 = 37 per region, 111 in all
	if s.PerRegionRPS != 250_000 || s.UsablePerInstance != 7000 || s.PerRegion != 37 || s.Fleet != 111 {
		t.Fatalf("%+v", s)
	}
	want := []string{
		"one region lost: 500,000 req/s over 2 regions = 250,000 req/s per region",
		"usable per instance: Q × (1 − headroom) = 10,000 × 0.70 = 7,000 req/s",
		"per region: ceil(250,000 / 7,000) = 36, + 1 (N+1) = 37 instances",
		"fleet: 3 regions × 37 = 111 instances",
	}
	for i, w := range want {
		if s.Steps[i] != w {
			t.Errorf("step %d: %q, want %q", i, s.Steps[i], w)
		}
	}
	// an exact fit needs no rounding up
	if s, _ := SizingFor(500_000, 3, 1, 0.5, 5000); s.PerRegion != 101 || s.Fleet != 303 {
		t.Errorf("exact fit: %+v", s)
	}
	for _, bad := range [][5]float64{
		{0, 3, 1, .3, 1000}, {500000, 3, 3, .3, 1000}, {500000, 0, 0, .3, 1000}, {500000, 3, -1, .3, 1000},
		{500000, 3, 1, 1, 1000}, {500000, 3, 1, -0.1, 1000}, {500000, 3, 1, .3, 0}, {500000, 3, 1, math.NaN(), 1000},
		{math.Inf(1), 3, 1, .3, 1000}, {500000, 3, 1, .3, math.NaN()},
	} {
		if _, err := SizingFor(bad[0], int(bad[1]), int(bad[2]), bad[3], bad[4]); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 7: "7", 12.96: "13.0", 99.5: "99.5", 1234: "1,234", 1234567.6: "1,234,568", -2500: "-2,500"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
}

func run(proto, mode, proxy string, rate float64, round int, req int64, p99us, proxyCPU float64) Run {
	return Run{Proto: proto, Mode: mode, Proxy: proxy, Rate: rate, Round: round, Tool: "openload", WallS: 2,
		ProxyCPU: proxyCPU, LoadCPU: 0.5, UpstreamCPU: 0.25, Out: ToolOut{Requests: req, P50us: p99us / 2, P99us: p99us}}
}

func TestAggregateAndCapacity(t *testing.T) {
	runs := []Run{
		run("h2", "ka", "rampart", 1000, 1, 2000, 3000, 0.2),
		run("h1", "ka", "nginx", 1000, 1, 2000, 1000, 0.1),
		run("h1", "ka", "chain", 2000, 1, 4000, 90000, 0.4),
		run("h1", "ka", "chain", 1000, 1, 2000, 2000, 0.2),
		run("h1", "ka", "chain", 1000, 2, 2000, 4000, 0.1),
		run("h1", "ka", "chain", 1000, 3, 2000, 3000, 0.4),
		run("h1", "ka", "rampart-h2x", 1000, 1, 2000, 1000, 0.1), // a variant compare.sh may grow
	}
	ss := Aggregate(runs)
	var order []string
	for _, s := range ss {
		order = append(order, s.Proto+" "+s.Proxy+" "+num(s.Rate))
	}
	if got := strings.Join(order, ", "); got != "h1 chain 1,000, h1 chain 2,000, h1 nginx 1,000, h1 rampart-h2x 1,000, h2 rampart 1,000" {
		t.Fatalf("order: %s", got)
	}
	c := ss[0]
	if c.ReqPerCPU != (Spread{10000, 5000, 20000, 3}) || c.P99ms != (Spread{3, 2, 4, 3}) || c.Achieved.Median != 1000 {
		t.Fatalf("chain @1000: %+v", c)
	}
	if c.CPU.Load != 250 || c.CPU.Upstream != 125 || c.CPU.Proxy != 100 {
		t.Fatalf("cpu split: %+v", c.CPU)
	}
	q := CapacityFrom(ss, "h1", "ka", "chain", 50)
	if q.Q != 1000 || q.Bound != "exact" {
		t.Fatalf("Q: %+v", q)
	}
	// zero proxy CPU or zero requests: no NaN or Inf
	z := Aggregate([]Run{run("h1", "new", "haproxy", 500, 1, 0, 0, 0)})
	if z[0].ReqPerCPU.Median != 0 || z[0].CPU.Proxy != 0 {
		t.Fatalf("zeros: %+v", z[0])
	}
}

func TestParseRunsTSV(t *testing.T) {
	files := map[string]string{"a.txt": openloadOut, "b.txt": "garbage"}
	read := func(n string) (string, error) {
		if s, ok := files[n]; ok {
			return s, nil
		}
		return "", errors.New("no such file")
	}
	tsv := "proto\tmode\trate\tround\tproxy\ttool\twall_s\tproxy_ticks\tload_ticks\tupstream_ticks\tother_ticks\thz\tout\n" +
		"h1\tka\t2000\t1\tchain\topenload\t2.004\t50\t80\t10\t-3\t100\ta.txt\n" +
		"h1\tka\t2000\t2\tchain\topenload\t2.0\t50\t80\t10\t0\t100\tb.txt\n" +
		"h1\tka\t2000\t3\tchain\topenload\t2.0\t50\t80\t10\t0\t100\tmissing.txt\n" +
		"h1\tka\tx\t1\tchain\topenload\t2.0\t50\t80\t10\t0\t100\ta.txt\n" +
		"h1\tka\t2000\t0\tchain\topenload\t2.0\t50\t80\t10\t0\t100\ta.txt\n" +
		"h1\tka\t2000\t1\tch ain\topenload\t2.0\t50\t80\t10\t0\t100\ta.txt\n" +
		"h1\tka\t2000\t1\tchain\topenload\t2.0\t50\t80\t10\t0\t0\ta.txt\n" +
		"h1\tka\t2000\t1\tchain\n"
	runs, err := parseRunsTSV(tsv, read)
	if len(runs) != 1 {
		t.Fatalf("got %d runs, want 1 (the good line kept): %+v", len(runs), runs)
	}
	r := runs[0]
	if r.ProxyCPU != 0.5 || r.LoadCPU != 0.8 || r.UpstreamCPU != 0.1 || r.OtherCPU != 0 || r.Out.Requests != 3990 || r.Rate != 2000 {
		t.Fatalf("run: %+v", r)
	}
	for _, want := range []string{"line 3:", "line 4: ", "no such file", "line 5:", "rate", "line 6:", "round", "line 7:", "bad name", "line 8:", "hz", "line 9:", "13"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want it to contain %q", err, want)
		}
	}
}

func TestCompareWith(t *testing.T) {
	old := map[string]float64{"a": 100, "b": 0, "gone": 1}
	cur := map[string]float64{"a": 80, "b": 5, "new": 2}
	d := CompareWith(old, cur)
	if len(d) != 2 || d[0] != (Delta{"a", 100, 80, -20}) || d[1] != (Delta{"b", 0, 5, 0}) {
		t.Fatalf("%+v", d)
	}
}

func FuzzParseRunsTSV(f *testing.F) {
	f.Add("h1\tka\t2000\t1\tchain\topenload\t2.004\t50\t80\t10\t-3\t100\ta.txt\n")
	f.Fuzz(func(t *testing.T, s string) {
		runs, _ := parseRunsTSV(s, func(string) (string, error) { return openloadOut, nil })
		for _, s := range Aggregate(runs) {
			for _, v := range []float64{s.ReqPerCPU.Median, s.P99ms.Max, s.CPU.Load, s.CPU.Proxy, s.Achieved.Min} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%+v", s)
				}
			}
		}
	})
}
