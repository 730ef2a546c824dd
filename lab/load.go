package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// TrafficOptions shape client traffic to the VIPs.
type TrafficOptions struct {
	Path    string        // default /whoami
	Rate    int           // requests started per second, over all sources; default 50
	Sources []string      // default every client source (v4 and v6), in turn
	Timeout time.Duration // per attempt; default 2 s
	// Retries is how many more attempts a failed request gets (a retrying
	// client for idempotent requests): each on a new connection, so ECMP
	// may pick another site. 0: none.
	Retries    int
	RetryDelay time.Duration // before the first retry, doubling for each next; default 25 ms
	Header     http.Header   // added to every request
}

// Result is one request of a load, over all its attempts.
type Result struct {
	Start, End time.Time
	Src, URL   string
	Attempts   int
	Site       string      // the site whose proxy answered the last attempt (Answer.From)
	Upstream   string      // the site of the upstream behind it (Answer.Site)
	Status     int         // the last attempt's status (0: no answer)
	Err        string      // the last attempt's error; "" when it succeeded
	Failures   []time.Time // when each failed attempt failed
	FirstErr   string      // the first failed attempt's error
}

// OK says whether the request succeeded (a 200 from a lab upstream) in the end.
func (r Result) OK() bool { return r.Err == "" }

// Traffic is client traffic running in the background.
type Traffic struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	res    []Result
}

// StartTraffic starts requests to the VIPs from the client namespace: each
// source in turn asks the VIP of its family, a new connection per attempt.
// A request succeeds on a 200 whose body names the site that served it.
func (l *Lab) StartTraffic(ctx context.Context, o TrafficOptions) *Traffic {
	if o.Path == "" {
		o.Path = "/whoami"
	}
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if len(o.Sources) == 0 {
		o.Sources = append(append([]string(nil), l.Client.V4...), l.Client.V6...)
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 25 * time.Millisecond
	}
	clients := map[string]*http.Client{}
	for _, s := range o.Sources {
		clients[s] = HTTPClient(l.Client.Netns, s, o.Timeout)
	}
	ctx, cancel := context.WithCancel(ctx)
	ld := &Traffic{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ld.done)
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / time.Duration(o.Rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-tick.C:
			}
			src := o.Sources[i%len(o.Sources)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := request(l, clients[src], src, URL(l.VIPFor(src), o.Path), o)
				ld.mu.Lock()
				ld.res = append(ld.res, r)
				ld.mu.Unlock()
			}()
		}
	}()
	return ld
}

// request runs one request with its retries. It does not stop on the
// load's end: a request started is finished, so nothing counts as lost
// for being cut off.
func request(l *Lab, hc *http.Client, src, url string, o TrafficOptions) Result {
	r := Result{Start: time.Now(), Src: src, URL: url}
	delay := o.RetryDelay
	for attempt := 0; attempt <= o.Retries; attempt++ {
		if attempt > 0 {
			time.Sleep(delay)
			delay *= 2
		}
		r.Attempts++
		a, status, err := attemptOnce(hc, url, o.Header)
		r.Site, r.Upstream, r.Status, r.Err = l.SiteOf(a.From), a.Site, status, ""
		if err == nil {
			break
		}
		r.Err = err.Error()
		if r.FirstErr == "" {
			r.FirstErr = r.Err
		}
		r.Failures = append(r.Failures, time.Now())
	}
	r.End = time.Now()
	return r
}

func attemptOnce(hc *http.Client, url string, h http.Header) (a Answer, status int, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return a, 0, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return a, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8192))
	if err != nil {
		return a, resp.StatusCode, fmt.Errorf("GET %s: read the body: %w", url, err)
	}
	_ = json.Unmarshal(body, &a)
	if resp.StatusCode != http.StatusOK || a.Site == "" {
		return a, resp.StatusCode, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return a, resp.StatusCode, nil
}

// Stop ends the traffic, waits for the requests in flight and returns the
// results.
func (ld *Traffic) Stop() TrafficResult {
	ld.cancel()
	<-ld.done
	return ld.Snapshot()
}

// Snapshot returns the results so far (the traffic keeps running).
func (ld *Traffic) Snapshot() TrafficResult {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	res := append([]Result(nil), ld.res...)
	sort.Slice(res, func(i, j int) bool { return res[i].Start.Before(res[j].Start) })
	return TrafficResult{Results: res}
}

// TrafficResult summarises a load.
type TrafficResult struct{ Results []Result }

// Requests is how many requests finished.
func (lr TrafficResult) Requests() int { return len(lr.Results) }

// Lost is how many requests failed in the end (after their retries).
func (lr TrafficResult) Lost() int {
	n := 0
	for _, r := range lr.Results {
		if !r.OK() {
			n++
		}
	}
	return n
}

// FailedAttempts is how many attempts failed, over all requests.
func (lr TrafficResult) FailedAttempts() int {
	n := 0
	for _, r := range lr.Results {
		n += len(r.Failures)
	}
	return n
}

// Retried is how many requests needed more than one attempt.
func (lr TrafficResult) Retried() int {
	n := 0
	for _, r := range lr.Results {
		if r.Attempts > 1 {
			n++
		}
	}
	return n
}

// ErrorWindow is the time from the first failed attempt to the last (0
// without failures; the span of one failure is 0 as well).
func (lr TrafficResult) ErrorWindow() time.Duration {
	var first, last time.Time
	for _, r := range lr.Results {
		for _, f := range r.Failures {
			if first.IsZero() || f.Before(first) {
				first = f
			}
			if f.After(last) {
				last = f
			}
		}
	}
	return last.Sub(first)
}

// BySite counts the successful requests each site served that started in
// [from, to) (zero times: unbounded).
func (lr TrafficResult) BySite(from, to time.Time) map[string]int {
	m := map[string]int{}
	for _, r := range lr.Results {
		if !r.OK() || (!from.IsZero() && r.Start.Before(from)) || (!to.IsZero() && !r.Start.Before(to)) {
			continue
		}
		m[r.Site]++
	}
	return m
}

// FirstError is the first lost request's last error, else the first
// failed attempt's error ("" when none failed).
func (lr TrafficResult) FirstError() string {
	for _, r := range lr.Results {
		if !r.OK() {
			return r.Err
		}
	}
	for _, r := range lr.Results {
		if r.FirstErr != "" {
			return r.FirstErr + " (then retried successfully)"
		}
	}
	return ""
}
