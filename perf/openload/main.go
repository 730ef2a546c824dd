// Command openload is an open-loop HTTP load generator for perf/compare.sh:
// it sends requests at a constant rate on a fixed schedule, whatever the
// server's latency, and measures each request's latency from the time it
// was due to be sent (not from when it was sent), so a stalled server is
// charged for the requests it delayed (no coordinated omission).
//
//	openload -rate 2000 -d 10s [-proto h1|h2|h3] [-c 64] [-new] [-H "Name: value"]... https://127.0.0.1:18443/bench
//
// h1 keeps up to -c keep-alive connections (requests wait for a free one);
// h2 and h3 spread requests round-robin over -c connections. -new opens a
// new connection per request instead, whatever the protocol (TLS sessions
// are resumed, as a returning browser's would be; h3: no 0-RTT). More than -max-inflight requests outstanding count as errors
// ("overload") instead of being sent late. Output: "key: value" lines.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
)

type config struct {
	url         string
	rate        float64
	duration    time.Duration
	proto       string
	conns       int
	newConn     bool
	maxInflight int
	timeout     time.Duration
	header      http.Header
}

type headerFlags struct{ h http.Header }

func (f *headerFlags) String() string { return "" }
func (f *headerFlags) Set(v string) error {
	name, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("header %q: want \"Name: value\"", v)
	}
	f.h.Add(strings.TrimSpace(name), strings.TrimSpace(val))
	return nil
}

// result is what one run measured.
type result struct {
	Sent, OK, Non2xx, Errors, Overload int64
	Elapsed                            time.Duration
	Latencies                          []time.Duration // of the 2xx responses, from the due time
	ErrSample                          string
}

func parseFlags(args []string) (config, error) {
	c := config{header: http.Header{}}
	fs := flag.NewFlagSet("openload", flag.ContinueOnError)
	fs.Float64Var(&c.rate, "rate", 1000, "requests per second (constant)")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "how long to send")
	fs.StringVar(&c.proto, "proto", "h1", "h1, h2 or h3")
	fs.IntVar(&c.conns, "c", 64, "connections (h1: at most, keep-alive; h2, h3: round-robin)")
	fs.BoolVar(&c.newConn, "new", false, "a new connection per request")
	fs.IntVar(&c.maxInflight, "max-inflight", 20000, "outstanding requests beyond this count as overload errors")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.Var(&headerFlags{c.header}, "H", "header \"Name: value\" on every request (repeatable)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 1 {
		return c, errors.New("want exactly one URL")
	}
	c.url = fs.Arg(0)
	switch {
	case c.rate <= 0 || c.rate > 1e6:
		return c, fmt.Errorf("-rate %v: want 0 < rate <= 1e6", c.rate)
	case c.duration <= 0:
		return c, fmt.Errorf("-d %v: want > 0", c.duration)
	case c.proto != "h1" && c.proto != "h2" && c.proto != "h3":
		return c, fmt.Errorf("-proto %q: want h1, h2 or h3", c.proto)
	case c.conns < 1:
		return c, fmt.Errorf("-c %d: want >= 1", c.conns)
	case c.maxInflight < 1:
		return c, fmt.Errorf("-max-inflight %d: want >= 1", c.maxInflight)
	}
	return c, nil
}

// pool hands out the client for request i and, with -new, a fresh
// connection per request that done closes.
type pool struct {
	cls   []*http.Client
	fresh func() (*http.Client, func())
}

func (p pool) get(i int64) (*http.Client, func()) {
	if p.fresh != nil {
		return p.fresh()
	}
	return p.cls[int(i)%len(p.cls)], func() {}
}

// copyingCache hands every dial its own copy of a cached TLS session:
// quic-go (v0.65) writes the session state's EarlyData field while resuming,
// so connections resuming the same cached session at once race (seen with
// -race in TestRunH3).
type copyingCache struct{ tls.ClientSessionCache }

func (c copyingCache) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := c.ClientSessionCache.Get(key)
	if !ok || cs == nil {
		return cs, ok
	}
	ticket, st, err := cs.ResumptionState()
	if err != nil || st == nil {
		return nil, false
	}
	b, err := st.Bytes()
	if err != nil {
		return nil, false
	}
	st2, err := tls.ParseSessionState(b)
	if err != nil {
		return nil, false
	}
	cp, err := tls.NewResumptionState(ticket, st2)
	if err != nil {
		return nil, false
	}
	return cp, true
}

// dialQUIC dials without 0-RTT and waits for the handshake (http3.Transport
// would DialEarly: quic-go v0.65 then races opening the control stream
// against the peer's transport parameters, seen with -race), each connection
// on its own UDP socket, as separate clients would be.
func dialQUIC(ctx context.Context, addr string, tlsConf *tls.Config, qc *quic.Config) (*quic.Conn, error) {
	return quic.DialAddr(ctx, addr, tlsConf, qc)
}

// clients builds the HTTP clients requests are spread over.
func clients(c config) pool {
	tlsc := &tls.Config{InsecureSkipVerify: true, ClientSessionCache: tls.NewLRUClientSessionCache(1024)} //nolint:gosec // bench certs are self-signed
	if c.proto == "h3" {
		tlsc.ClientSessionCache = copyingCache{tlsc.ClientSessionCache}
	}
	switch {
	case c.proto == "h2" && c.newConn:
		return pool{fresh: func() (*http.Client, func()) {
			tr := &http2.Transport{TLSClientConfig: tlsc}
			return &http.Client{Timeout: c.timeout, Transport: tr}, tr.CloseIdleConnections
		}}
	case c.proto == "h3" && c.newConn:
		return pool{fresh: func() (*http.Client, func()) {
			tr := &http3.Transport{TLSClientConfig: tlsc, DisableCompression: true, Dial: dialQUIC}
			return &http.Client{Timeout: c.timeout, Transport: tr}, func() { _ = tr.Close() }
		}}
	case c.proto == "h2" || c.proto == "h3":
		out := make([]*http.Client, c.conns)
		for i := range out {
			var tr http.RoundTripper = &http2.Transport{TLSClientConfig: tlsc.Clone()}
			if c.proto == "h3" {
				tr = &http3.Transport{TLSClientConfig: tlsc.Clone(), DisableCompression: true, Dial: dialQUIC}
			}
			out[i] = &http.Client{Timeout: c.timeout, Transport: tr}
		}
		return pool{cls: out}
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsc,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // no h2
		MaxConnsPerHost:     c.conns,
		MaxIdleConnsPerHost: c.conns,
		DisableKeepAlives:   c.newConn,
	}
	if c.newConn {
		tr.MaxConnsPerHost = 0
	}
	return pool{cls: []*http.Client{{Timeout: c.timeout, Transport: tr}}}
}

func run(ctx context.Context, c config) result {
	cls := clients(c)
	var res result
	var mu sync.Mutex
	var wg sync.WaitGroup
	var inflight atomic.Int64
	var errOnce sync.Once
	lat := make([]time.Duration, 0, int(c.rate*c.duration.Seconds())+1)
	interval := time.Duration(float64(time.Second) / c.rate)
	total := int64(c.rate * c.duration.Seconds())
	start := time.Now()
	var ok, non2xx, errs, over atomic.Int64
	for i := int64(0); i < total && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		res.Sent++
		if inflight.Add(1) > int64(c.maxInflight) {
			inflight.Add(-1)
			over.Add(1)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inflight.Add(-1)
			cl, done := cls.get(i)
			defer done()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
			if err == nil {
				req.Header = c.header.Clone()
				var resp *http.Response
				if resp, err = cl.Do(req); err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
						non2xx.Add(1)
						return
					}
				}
			}
			if err != nil {
				errs.Add(1)
				errOnce.Do(func() { res.ErrSample = err.Error() })
				return
			}
			d := time.Since(due)
			ok.Add(1)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.OK, res.Non2xx, res.Errors, res.Overload = ok.Load(), non2xx.Load(), errs.Load(), over.Load()
	slices.Sort(lat)
	res.Latencies = lat
	return res
}

// quantile of sorted latencies (nearest rank); 0 when there are none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func report(w io.Writer, c config, r result) {
	us := func(d time.Duration) int64 { return d.Microseconds() }
	fmt.Fprintf(w, "offered: %.0f req/s for %s (%s, c=%d, new=%v)\n", c.rate, c.duration, c.proto, c.conns, c.newConn)
	fmt.Fprintf(w, "sent: %d\nrequests: %d\nnon2xx: %d\nerrors: %d\noverload: %d\n", r.Sent, r.OK, r.Non2xx, r.Errors, r.Overload)
	fmt.Fprintf(w, "elapsed: %.3fs\nreq/s: %.1f\n", r.Elapsed.Seconds(), float64(r.OK)/r.Elapsed.Seconds())
	l := r.Latencies
	fmt.Fprintf(w, "latency_us: p50=%d p90=%d p99=%d p99.9=%d max=%d\n",
		us(quantile(l, .5)), us(quantile(l, .9)), us(quantile(l, .99)), us(quantile(l, .999)), us(quantile(l, 1)))
	if r.ErrSample != "" {
		fmt.Fprintf(w, "error-sample: %s\n", r.ErrSample)
	}
}

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "openload:", err)
		os.Exit(2)
	}
	r := run(context.Background(), c)
	report(os.Stdout, c, r)
	if r.OK == 0 {
		os.Exit(1)
	}
}
