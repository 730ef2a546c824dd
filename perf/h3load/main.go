// Command h3load is a small HTTP/3 load generator for perf/compare.sh, which
// needs one because h2load on Debian 12 is built without HTTP/3 (no ngtcp2).
//
//	h3load [-c 64] [-m 10] [-d 10s] [-insecure=true] [-H "Name: value"]... https://127.0.0.1:18443/bench
//
// It opens -c QUIC connections (each on its own UDP socket, as separate
// clients would), makes one request on each to finish the handshakes, then
// runs -m workers per connection for -d, each sending GET requests back to
// back on its connection (so up to c×m streams are in flight). At the end of
// -d the workers stop starting requests; the ones in flight finish and count.
// Results go to stdout as "key: value" lines for scripts:
//
//	requests: N     responses with a 2xx status (the figure compare.sh uses)
//	non2xx: K       other statuses, split by class in the same line
//	errors: E       requests that got no response (transport errors, timeouts)
//
// It is built to be cheap, since it shares the machine's cores with the
// proxy under test: one reused request and read buffer per worker, counters
// and the latency histogram per worker (no shared atomics on the hot path),
// and a relaxed GC (-gogc). GOMAXPROCS is the Go default (all CPUs) unless
// set in the environment.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type config struct {
	url      string
	conns    int           // QUIC connections
	streams  int           // concurrent requests (workers) per connection
	duration time.Duration // how long workers start new requests
	grace    time.Duration // how long in-flight requests may take after that
	insecure bool          // skip certificate verification (self-signed bench certs)
	header   http.Header   // added to every request (-H), e.g. Authorization
}

// headerFlags collects repeated -H "Name: value" flags, as curl and h2load take them.
type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }

func (f *headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("want \"Name: value\", got %q", s)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(name, value)
	return nil
}

// result is what a run measured; counts are over all workers.
type result struct {
	tls      string // negotiated TLS version, cipher and ALPN, from the first connection
	connect  time.Duration
	dials    int64 // QUIC connections dialled, including re-dials after a connection died
	ok       int64 // 2xx
	status   [6]int64
	errs     int64
	elapsed  time.Duration // start of the load phase until the last worker stopped
	hist     histogram
	errTexts map[string]int64 // a few distinct error texts, with counts
}

func main() {
	var cfg config
	flag.IntVar(&cfg.conns, "c", 64, "QUIC connections")
	flag.IntVar(&cfg.streams, "m", 10, "concurrent requests (streams) per connection")
	flag.DurationVar(&cfg.duration, "d", 10*time.Second, "duration of the load phase")
	flag.DurationVar(&cfg.grace, "grace", 5*time.Second, "time allowed for in-flight requests after -d; then they are cancelled and count as errors")
	flag.BoolVar(&cfg.insecure, "insecure", true, "skip TLS certificate verification")
	var hdr headerFlags
	flag.Var(&hdr, "H", "request header \"Name: value\" added to every request; repeatable")
	gogc := flag.Int("gogc", 400, "GC percent for this process (higher: less GC CPU, more memory)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: h3load [flags] https://host:port/path\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || cfg.conns < 1 || cfg.streams < 1 || cfg.duration <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg.url, cfg.header = flag.Arg(0), hdr.h
	debug.SetGCPercent(*gogc)

	fmt.Printf("h3load: %s conns=%d streams/conn=%d duration=%s gomaxprocs=%d\n",
		cfg.url, cfg.conns, cfg.streams, cfg.duration, runtime.GOMAXPROCS(0))
	r, err := run(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "h3load: %v\n", err)
		os.Exit(1)
	}
	r.print(os.Stdout, cfg)
	if r.ok == 0 {
		os.Exit(1) // nothing succeeded: let the calling script notice
	}
}

// run connects, loads for cfg.duration and returns the counts. An error
// means the load phase never started (bad URL, a connection failed).
func run(cfg config) (*result, error) {
	u, err := url.Parse(cfg.url)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("need an https:// URL, got %q", cfg.url)
	}
	r := &result{errTexts: map[string]int64{}}

	// One http3.Transport per connection: a Transport keeps one connection
	// per host, so N of them give N connections. Dialling through our own
	// Dial gives each its own UDP socket (quic.DialAddr) and counts dials.
	var dials atomic.Int64
	dial := func(ctx context.Context, addr string, tlsConf *tls.Config, qc *quic.Config) (*quic.Conn, error) {
		dials.Add(1)
		return quic.DialAddr(ctx, addr, tlsConf, qc) // not DialAddrEarly: no 0-RTT
	}
	trs := make([]*http3.Transport, cfg.conns)
	for i := range trs {
		trs[i] = &http3.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: cfg.insecure}, //nolint:gosec // bench certs are self-signed
			Dial:               dial,
			DisableCompression: true,
		}
	}
	defer func() {
		for _, t := range trs {
			_ = t.Close()
		}
	}()

	// Connect phase: one request per connection, all at once, not counted.
	t0 := time.Now()
	connErrs := make([]error, cfg.conns)
	tlsOf := make([]string, cfg.conns)
	var wg sync.WaitGroup
	for i, t := range trs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.url, nil)
			addHeader(req, cfg.header)
			resp, err := t.RoundTrip(req)
			if err != nil {
				connErrs[i] = err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.TLS != nil {
				tlsOf[i] = fmt.Sprintf("%s %s alpn=%s proto=%s", tls.VersionName(resp.TLS.Version),
					tls.CipherSuiteName(resp.TLS.CipherSuite), resp.TLS.NegotiatedProtocol, resp.Proto)
			}
		})
	}
	wg.Wait()
	r.connect = time.Since(t0)
	if err := errors.Join(connErrs...); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	r.tls = tlsOf[0]

	// Load phase. stop is set at the end of the duration; ctx cancels what
	// is still in flight cfg.grace later.
	var stop atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+cfg.grace)
	defer cancel()
	workers := make([]worker, cfg.conns*cfg.streams)
	start := time.Now()
	timer := time.AfterFunc(cfg.duration, func() { stop.Store(true) })
	defer timer.Stop()
	for i := range workers {
		w := &workers[i]
		w.tr = trs[i/cfg.streams]
		w.req, _ = http.NewRequestWithContext(ctx, http.MethodGet, cfg.url, nil)
		addHeader(w.req, cfg.header)
		wg.Go(func() { w.loop(&stop) })
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.dials = dials.Load()

	for i := range workers {
		w := &workers[i]
		r.ok += w.status[2]
		for c := range r.status {
			r.status[c] += w.status[c]
		}
		r.errs += w.errs
		r.hist.add(&w.hist)
		for text, n := range w.errTexts {
			if _, seen := r.errTexts[text]; seen || len(r.errTexts) < 5 {
				r.errTexts[text] += n
			}
		}
	}
	return r, nil
}

func addHeader(req *http.Request, h http.Header) {
	for name, values := range h {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
}

// worker sends one request at a time on its connection's transport. Its
// fields are touched only by its own goroutine until run collects them.
type worker struct {
	tr       *http3.Transport
	req      *http.Request // reused: a GET without a body, not modified by RoundTrip
	status   [6]int64      // by status class: status[2] counts 2xx
	errs     int64
	hist     histogram
	errTexts map[string]int64 // at most 5 distinct texts per worker
	buf      [4096]byte
}

func (w *worker) loop(stop *atomic.Bool) {
	for !stop.Load() {
		t0 := time.Now()
		resp, err := w.tr.RoundTrip(w.req)
		if err == nil {
			err = w.drain(resp)
		}
		if err != nil {
			w.fail(err)
			if stop.Load() || w.req.Context().Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond) // don't spin if the server is gone
			continue
		}
		w.hist.record(time.Since(t0))
		if c := resp.StatusCode / 100; c >= 1 && c <= 5 {
			w.status[c]++
		} else {
			w.status[0]++
		}
	}
}

// drain reads the body to its end (so the stream completes) and closes it.
func (w *worker) drain(resp *http.Response) error {
	var err error
	for err == nil {
		_, err = resp.Body.Read(w.buf[:])
	}
	_ = resp.Body.Close()
	if err == io.EOF {
		return nil
	}
	return err
}

func (w *worker) fail(err error) {
	w.errs++
	if w.errTexts == nil {
		w.errTexts = map[string]int64{}
	}
	text := err.Error()
	if _, seen := w.errTexts[text]; seen || len(w.errTexts) < 5 {
		w.errTexts[text]++
	}
}

func (r *result) print(out io.Writer, cfg config) {
	fmt.Fprintf(out, "tls: %s\n", r.tls)
	fmt.Fprintf(out, "connect: %d connections in %s\n", cfg.conns, r.connect.Round(time.Millisecond))
	fmt.Fprintf(out, "dials: %d\n", r.dials)
	if r.dials > int64(cfg.conns) {
		fmt.Fprintf(out, "warning: %d connections were re-established during the run\n", r.dials-int64(cfg.conns))
	}
	fmt.Fprintf(out, "requests: %d\n", r.ok)
	fmt.Fprintf(out, "non2xx: %d (1xx=%d 3xx=%d 4xx=%d 5xx=%d other=%d)\n",
		r.status[0]+r.status[1]+r.status[3]+r.status[4]+r.status[5],
		r.status[1], r.status[3], r.status[4], r.status[5], r.status[0])
	fmt.Fprintf(out, "errors: %d\n", r.errs)
	fmt.Fprintf(out, "elapsed: %.3fs\n", r.elapsed.Seconds())
	fmt.Fprintf(out, "req/s: %.1f\n", float64(r.ok)/r.elapsed.Seconds())
	fmt.Fprintf(out, "latency_us: p50=%d p90=%d p99=%d p99.9=%d max<=%d\n",
		r.hist.quantile(0.5), r.hist.quantile(0.9), r.hist.quantile(0.99), r.hist.quantile(0.999), r.hist.quantile(1))
	texts := make([]string, 0, len(r.errTexts))
	for t := range r.errTexts {
		texts = append(texts, t)
	}
	sort.Strings(texts)
	for _, t := range texts {
		fmt.Fprintf(out, "error-sample: %dx %s\n", r.errTexts[t], t)
	}
}

// histogram counts latencies in microseconds in log-linear buckets: exact
// below 8 µs, then 8 buckets per power of two (≤ 12.5 % wide).
type histogram [512]int64

func bucketOf(us uint64) int {
	if us < 8 {
		return int(us)
	}
	e := bits.Len64(us) // ≥ 4
	return (e-3)*8 + int(us>>(e-4))&7
}

// upper returns the largest value that falls in bucket i.
func upper(i int) uint64 {
	if i < 8 {
		return uint64(i)
	}
	e, m := i/8+3, uint64(i%8)
	return (8|m+1)<<(e-4) - 1
}

func (h *histogram) record(d time.Duration) { h[bucketOf(uint64(d.Microseconds()))]++ }

func (h *histogram) add(o *histogram) {
	for i, n := range o {
		h[i] += n
	}
}

// quantile returns an upper bound of the q-quantile, in µs (0 when empty).
func (h *histogram) quantile(q float64) uint64 {
	var total int64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i, n := range h {
		seen += n
		if seen >= rank {
			return upper(i)
		}
	}
	return upper(len(h) - 1)
}
