package main

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ToolOut is what one load-tool run reported, whichever the tool.
// Latencies are in microseconds; 0 when the tool did not report them.
type ToolOut struct {
	Tool     string  `json:"tool"`
	Sent     int64   `json:"sent"`     // openload: requests sent (including overload); else = Requests
	Requests int64   `json:"requests"` // responses with a 2xx status
	Non2xx   int64   `json:"non2xx"`
	Errors   int64   `json:"errors"`   // transport errors, timeouts, socket errors
	Overload int64   `json:"overload"` // openload: not sent because too many were outstanding
	RPS      float64 `json:"rps"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
}

// Failed is every request that did not end in a 2xx.
func (o ToolOut) Failed() int64 { return o.Non2xx + o.Errors + o.Overload }

// keyValues reads "key: value" lines (openload, h3load); other lines are skipped.
func keyValues(text string) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.ContainsAny(k, " \t") {
			continue
		}
		if _, dup := kv[k]; !dup {
			kv[k] = strings.TrimSpace(v)
		}
	}
	return kv
}

// count parses the first field of a "key: N ..." value.
func count(kv map[string]string, key string) (int64, error) {
	v, ok := kv[key]
	if !ok {
		return 0, fmt.Errorf("no %q line", key)
	}
	f, _, _ := strings.Cut(v, " ")
	n, err := strconv.ParseInt(f, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: not a count", key, v)
	}
	return n, nil
}

// finite parses a float and refuses NaN, infinities and negatives.
func finite(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%q: not a finite non-negative number", s)
	}
	return f, nil
}

// latencyFields reads "p50=123 p99=456 max<=789" into a map of microseconds.
func latencyFields(v string) map[string]float64 {
	out := map[string]float64{}
	for _, f := range strings.Fields(v) {
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		k = strings.TrimSuffix(k, "<")
		if x, err := finite(val); err == nil {
			out[k] = x
		}
	}
	return out
}

// ParseOpenload reads perf/openload's report.
func ParseOpenload(text string) (ToolOut, error) {
	o := ToolOut{Tool: "openload"}
	kv := keyValues(text)
	var errs []error
	for _, f := range []struct {
		key string
		dst *int64
	}{{"sent", &o.Sent}, {"requests", &o.Requests}, {"non2xx", &o.Non2xx}, {"errors", &o.Errors}, {"overload", &o.Overload}} {
		n, err := count(kv, f.key)
		errs = append(errs, err)
		*f.dst = n
	}
	if v, ok := kv["req/s"]; ok {
		r, err := finite(v)
		errs = append(errs, err)
		o.RPS = r
	} else {
		errs = append(errs, errors.New(`no "req/s" line`))
	}
	lat, ok := kv["latency_us"]
	if !ok {
		errs = append(errs, errors.New(`no "latency_us" line`))
	}
	l := latencyFields(lat)
	o.P50us, o.P99us = l["p50"], l["p99"]
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("openload output: %w", err)
	}
	return o, nil
}

// ParseH3load reads perf/h3load's report.
func ParseH3load(text string) (ToolOut, error) {
	o := ToolOut{Tool: "h3load"}
	kv := keyValues(text)
	var errs []error
	var err error
	o.Requests, err = count(kv, "requests")
	errs = append(errs, err)
	o.Non2xx, err = count(kv, "non2xx")
	errs = append(errs, err)
	o.Errors, err = count(kv, "errors")
	errs = append(errs, err)
	if v, ok := kv["req/s"]; ok {
		o.RPS, err = finite(v)
		errs = append(errs, err)
	} else {
		errs = append(errs, errors.New(`no "req/s" line`))
	}
	l := latencyFields(kv["latency_us"])
	o.P50us, o.P99us = l["p50"], l["p99"]
	o.Sent = o.Requests + o.Non2xx + o.Errors
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("h3load output: %w", err)
	}
	return o, nil
}

// duration parses wrk's "1.23ms", "845.00us", "2.01s", "1.5m".
func wrkDuration(s string) (time.Duration, error) {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := finite(num)
			if err != nil {
				return 0, fmt.Errorf("duration %q: %w", s, err)
			}
			if f*u.scale > math.MaxInt64/2 {
				return 0, fmt.Errorf("duration %q: too long", s)
			}
			return time.Duration(f * u.scale), nil
		}
	}
	return 0, fmt.Errorf("duration %q: no unit", s)
}

// ParseWrk reads wrk's report (with --latency for the percentiles).
func ParseWrk(text string) (ToolOut, error) {
	o := ToolOut{Tool: "wrk"}
	var seenReq, seenRate bool
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	inDist := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Latency Distribution"):
			inDist = true
		case inDist && len(f) == 2 && strings.HasSuffix(f[0], "%"):
			d, err := wrkDuration(f[1])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			switch f[0] {
			case "50%", "50.000%":
				o.P50us = float64(d.Microseconds())
			case "99%", "99.000%":
				o.P99us = float64(d.Microseconds())
			}
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			inDist = false
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("requests line %q: not a count", line))
				continue
			}
			o.Requests, seenReq = n, true
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			r, err := finite(f[1])
			if err != nil {
				errs = append(errs, fmt.Errorf("Requests/sec line %q: %w", line, err))
				continue
			}
			o.RPS, seenRate = r, true
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:") && len(f) == 5:
			n, err := strconv.ParseInt(f[4], 10, 64)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("non-2xx line %q: not a count", line))
				continue
			}
			o.Non2xx = n
		case strings.HasPrefix(line, "Socket errors:"):
			// Socket errors: connect 0, read 2, write 0, timeout 5
			for _, part := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				pf := strings.Fields(part)
				if len(pf) != 2 {
					errs = append(errs, fmt.Errorf("socket errors line %q: bad field %q", line, part))
					continue
				}
				n, err := strconv.ParseInt(pf[1], 10, 64)
				if err != nil || n < 0 {
					errs = append(errs, fmt.Errorf("socket errors line %q: %q not a count", line, part))
					continue
				}
				o.Errors += n
			}
		}
	}
	if !seenReq {
		errs = append(errs, errors.New(`no "N requests in" line`))
	}
	if !seenRate {
		errs = append(errs, errors.New(`no "Requests/sec:" line`))
	}
	// wrk counts non-2xx responses among its requests
	o.Requests = max(o.Requests-o.Non2xx, 0)
	o.Sent = o.Requests + o.Non2xx + o.Errors
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("wrk output: %w", err)
	}
	return o, nil
}

// ParseH2load reads h2load's report.
//
//	finished in 10.00s, 20000.00 req/s, 1.2MB/s
//	requests: 200000 total, 200000 started, 200000 done, 199990 succeeded, 10 failed, 0 errored, 0 timeout
//	status codes: 199990 2xx, 0 3xx, 10 4xx, 0 5xx
//	time for request:  1.00ms  20.00ms  5.00ms  2.00ms  70.00%
func ParseH2load(text string) (ToolOut, error) {
	o := ToolOut{Tool: "h2load"}
	var seen [3]bool
	var errs []error
	num := func(line string, s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("line %q: %q not a count", line, s))
			return 0
		}
		return n
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "finished in") && len(f) >= 5 && strings.HasPrefix(f[4], "req/s"):
			r, err := finite(f[3])
			if err != nil {
				errs = append(errs, fmt.Errorf("line %q: %w", line, err))
				continue
			}
			o.RPS, seen[0] = r, true
		case strings.HasPrefix(line, "requests:") && len(f) >= 15:
			// "failed" (f[9]): requests that got no complete response; errored and
			// timeout (f[11], f[13]) are counted within it.
			o.Errors = num(line, f[9])
			seen[1] = true
		case strings.HasPrefix(line, "status codes:") && len(f) >= 10:
			o.Requests = num(line, f[2])
			o.Non2xx = num(line, f[4]) + num(line, f[6]) + num(line, f[8])
			seen[2] = true
		}
	}
	for i, what := range []string{`"finished in ... req/s"`, `"requests:"`, `"status codes:"`} {
		if !seen[i] {
			errs = append(errs, fmt.Errorf("no %s line", what))
		}
	}
	o.Sent = o.Requests + o.Non2xx + o.Errors
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("h2load output: %w", err)
	}
	return o, nil
}

// ParseTool picks the parser by tool name.
func ParseTool(tool, text string) (ToolOut, error) {
	switch tool {
	case "openload":
		return ParseOpenload(text)
	case "wrk":
		return ParseWrk(text)
	case "h2load":
		return ParseH2load(text)
	case "h3load":
		return ParseH3load(text)
	}
	return ToolOut{}, fmt.Errorf("unknown load tool %q", tool)
}

// Bench is one result line of `go test -bench`.
type Bench struct {
	Name    string             `json:"name"` // without the "Benchmark" prefix and the -GOMAXPROCS suffix
	N       int64              `json:"n"`
	Metrics map[string]float64 `json:"metrics"` // unit -> value, e.g. "ns/op", "x-bare"
}

// ParseBench reads the result lines of `go test -bench` output; other lines
// (logs, PASS, ok) are skipped. A malformed result line is an error, but the
// good lines are still returned.
func ParseBench(text string) ([]Bench, error) {
	var out []Bench
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue // "BenchmarkX" alone: a sub-benchmark parent or a log line
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // a log line that starts with the name, e.g. "BenchmarkX/a: message"
		}
		if len(f)%2 != 0 || n <= 0 {
			errs = append(errs, fmt.Errorf("benchmark line %q: want name, iterations and value/unit pairs", line))
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if name == "" {
			errs = append(errs, fmt.Errorf("benchmark line %q: no name", line))
			continue
		}
		b := Bench{Name: name, N: n, Metrics: map[string]float64{}}
		bad := false
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("benchmark line %q: value %q", line, f[i]))
				bad = true
				break
			}
			b.Metrics[f[i+1]] = v
		}
		if !bad {
			out = append(out, b)
		}
	}
	return out, errors.Join(errs...)
}

// Figure is one "FIGURE name: value" line of a test log or lab drill.
type Figure struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ParseFigures collects the FIGURE lines, in order.
func ParseFigures(text string) []Figure {
	var out []Figure
	for _, line := range strings.Split(text, "\n") {
		_, rest, ok := strings.Cut(line, "FIGURE ")
		if !ok {
			continue
		}
		// names may hold ": " themselves ("crash: requests lost"); values do not
		name, val := rest, ""
		if i := strings.LastIndex(rest, ": "); i >= 0 {
			name, val = rest[:i], rest[i+2:]
		}
		out = append(out, Figure{Name: strings.TrimSpace(name), Value: strings.TrimSpace(val)})
	}
	return out
}

// SwapOut is what TestSnapshotSwapUnderLoad reported.
type SwapOut struct {
	Requests int64 `json:"requests"`
	Before   int64 `json:"before_swap"`
	Errors   int64 `json:"errors"`
}

// ParseSwap reads l7/proxy's TestSnapshotSwapUnderLoad -v log: on success
// "N requests, M before the swap, 0 failed"; on failure "F of N requests failed".
func ParseSwap(text string) (SwapOut, error) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if _, rest, ok := strings.Cut(line, ".go:"); ok {
			if _, r, ok := strings.Cut(rest, ": "); ok {
				line = r
			}
		}
		var s SwapOut
		if n, _ := fmt.Sscanf(line, "%d requests, %d before the swap, %d failed", &s.Requests, &s.Before, &s.Errors); n == 3 {
			return s, nil
		}
		if n, _ := fmt.Sscanf(line, "%d of %d requests failed", &s.Errors, &s.Requests); n == 2 {
			return s, nil
		}
	}
	return SwapOut{}, errors.New("swap test log: no \"N requests, M before the swap\" or \"F of N requests failed\" line")
}
