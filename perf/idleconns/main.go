// Command idleconns measures what idle keep-alive connections cost a
// server: it opens -n TLS connections to -addr, sends one request on each
// (HTTP/1.1 or HTTP/2), keeps them all open and idle, and reports the
// growth of the resident memory (VmRSS in /proc/PID/status) of the -pid
// processes, in total and per connection, after -settle.
//
// With -gc-metrics (a Go server's Prometheus /metrics), it first waits for
// the server's next garbage collection after the last connection opened
// (go_gc_duration_seconds_count grows), then -settle: with every connection
// idle nothing allocates, so that collection is Go's forced one, up to two
// minutes later, and a reading taken before it still counts the set-up's
// garbage (28 against 39 KB per idle h2 connection at the same commit).
//
//	idleconns -addr 127.0.0.1:18743 -n 10000 -proto h1 -pid 1234[,1235] [-gc-metrics http://127.0.0.1:19971/metrics]
//
// Output: "key: value" lines (perf/idle.sh reads them).
package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

type config struct {
	addr, proto, path string
	n, parallel       int
	pids              []int
	settle            time.Duration
	gcMetrics         string        // a Go server's /metrics: wait for its next GC before -settle
	gcWait            time.Duration // at most this long
}

func main() {
	var c config
	var pids string
	flag.StringVar(&c.addr, "addr", "", "server address host:port (TLS)")
	flag.StringVar(&c.proto, "proto", "h1", "h1 or h2")
	flag.StringVar(&c.path, "path", "/", "request path")
	flag.IntVar(&c.n, "n", 10000, "connections to open")
	flag.IntVar(&c.parallel, "parallel", 64, "connections opened at once")
	flag.StringVar(&pids, "pid", "", "comma-separated PIDs whose RSS is measured")
	flag.DurationVar(&c.settle, "settle", 3*time.Second, "wait after the last connection before measuring")
	flag.StringVar(&c.gcMetrics, "gc-metrics", "", "a Go server's /metrics URL: wait for its next garbage collection (go_gc_duration_seconds_count) before -settle")
	flag.DurationVar(&c.gcWait, "gc-wait", 5*time.Minute, "with -gc-metrics: the longest wait for that collection")
	flag.Parse()
	var err error
	if c.pids, err = parsePIDs(pids); err == nil {
		err = check(c)
	}
	if err == nil {
		err = run(c, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idleconns:", err)
		os.Exit(1)
	}
}

func parsePIDs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("-pid: %q is not a process id", f)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("-pid: at least one process id")
	}
	return out, nil
}

func check(c config) error {
	switch {
	case c.addr == "":
		return errors.New("-addr is required")
	case c.proto != "h1" && c.proto != "h2":
		return fmt.Errorf("-proto %q: h1 or h2", c.proto)
	case c.n < 1 || c.n > 1_000_000:
		return fmt.Errorf("-n %d: 1..1000000", c.n)
	case c.parallel < 1:
		return fmt.Errorf("-parallel %d: at least 1", c.parallel)
	case c.gcMetrics != "" && !strings.HasPrefix(c.gcMetrics, "http://") && !strings.HasPrefix(c.gcMetrics, "https://"):
		return fmt.Errorf("-gc-metrics %q: an http(s) URL", c.gcMetrics)
	case c.gcMetrics != "" && c.gcWait <= 0:
		return fmt.Errorf("-gc-wait %v: more than 0", c.gcWait)
	}
	return nil
}

// rss is the summed VmRSS of pids, in bytes.
func rss(pids []int) (int64, error) {
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			return 0, err
		}
		v, err := parseRSS(string(b))
		if err != nil {
			return 0, fmt.Errorf("pid %d: %w", p, err)
		}
		sum += v
	}
	return sum, nil
}

// parseRSS reads "VmRSS:  1234 kB" from a /proc/PID/status text.
func parseRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, fmt.Errorf("VmRSS line %q", line)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line")
}

// held is an open connection and what keeps its HTTP/2 client alive.
type held struct {
	c  net.Conn
	cc *http2.ClientConn
}

func open(c config) (*held, error) {
	proto := "http/1.1"
	if c.proto == "h2" {
		proto = "h2"
	}
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", c.addr,
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}}) // a benchmark against our own certificate
	if err != nil {
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol != proto && !(proto == "http/1.1" && tc.ConnectionState().NegotiatedProtocol == "") {
		tc.Close()
		return nil, fmt.Errorf("ALPN gave %q, want %q", tc.ConnectionState().NegotiatedProtocol, proto)
	}
	host, _, _ := net.SplitHostPort(c.addr)
	if c.proto == "h1" {
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", c.path, host); err != nil {
			tc.Close()
			return nil, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			tc.Close()
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_ = tc.SetDeadline(time.Time{})
		if resp.StatusCode != 200 {
			tc.Close()
			return nil, fmt.Errorf("status %d", resp.StatusCode)
		}
		return &held{c: tc}, nil
	}
	tr := &http2.Transport{ReadIdleTimeout: 0}
	cc, err := tr.NewClientConn(tc)
	if err != nil {
		tc.Close()
		return nil, err
	}
	req, _ := http.NewRequest("GET", "https://"+c.addr+c.path, nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		tc.Close()
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		tc.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return &held{c: tc, cc: cc}, nil
}

func run(c config, out io.Writer) error {
	before, err := rss(c.pids)
	if err != nil {
		return err
	}
	conns := make([]*held, c.n)
	errs := make([]error, c.n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, c.parallel)
	start := time.Now()
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			conns[i], errs[i] = open(c)
		}()
	}
	wg.Wait()
	opened := 0
	var first error
	for i := range conns {
		if errs[i] == nil {
			opened++
		} else if first == nil {
			first = errs[i]
		}
	}
	defer func() {
		for _, h := range conns {
			if h != nil {
				h.c.Close()
			}
		}
	}()
	if opened < c.n {
		return fmt.Errorf("%d of %d connections failed, the first: %v", c.n-opened, c.n, first)
	}
	var gcWaited time.Duration
	if c.gcMetrics != "" {
		if gcWaited, err = waitGC(c.gcMetrics, c.gcWait); err != nil {
			return err
		}
	}
	time.Sleep(c.settle) // let the server settle its per-connection state before measuring
	after, err := rss(c.pids)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "connections: %d\n", opened)
	fmt.Fprintf(out, "open_s: %.2f\n", time.Since(start).Seconds()-c.settle.Seconds()-gcWaited.Seconds())
	if c.gcMetrics != "" {
		fmt.Fprintf(out, "gc_waited_s: %.1f\n", gcWaited.Seconds())
	}
	fmt.Fprintf(out, "rss_before_bytes: %d\n", before)
	fmt.Fprintf(out, "rss_after_bytes: %d\n", after)
	fmt.Fprintf(out, "rss_per_conn_bytes: %d\n", (after-before)/int64(opened))
	return nil
}

// waitGC polls a Go server's /metrics until go_gc_duration_seconds_count
// grows past its first reading, for at most limit.
func waitGC(url string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	first, err := gcCount(url)
	if err != nil {
		return 0, err
	}
	for {
		time.Sleep(time.Second)
		n, err := gcCount(url)
		if err != nil {
			return 0, err
		}
		if n > first {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("-gc-metrics %s: no garbage collection within %v (count stayed %d)", url, limit, first)
		}
	}
}

func gcCount(url string) (int64, error) {
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, fmt.Errorf("-gc-metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("-gc-metrics %s: %w", url, err)
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("-gc-metrics %s: status %d", url, resp.StatusCode)
	}
	n, err := parseGCCount(string(body))
	if err != nil {
		return 0, fmt.Errorf("-gc-metrics %s: %w", url, err)
	}
	return n, nil
}

// parseGCCount reads "go_gc_duration_seconds_count N" from a Prometheus
// text exposition.
func parseGCCount(text string) (int64, error) {
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "go_gc_duration_seconds_count ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("go_gc_duration_seconds_count line %q", line)
		}
		return n, nil
	}
	return 0, errors.New("no go_gc_duration_seconds_count line (not a Go server's /metrics?)")
}
