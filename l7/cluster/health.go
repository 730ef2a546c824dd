package cluster

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// checkers runs the active health checks, one goroutine per endpoint of a
// cluster that configures them, off the request path. A checker keeps
// running across snapshot swaps while its cluster and endpoint stay; its
// settings follow the newest snapshot.
type checkers struct {
	metrics *Metrics
	log     *slog.Logger
	mu      sync.Mutex
	m       map[checkKey]*checker
}

type checkKey struct{ cluster, addr string }

type checker struct {
	key    checkKey
	es     *endpointState
	cfg    atomic.Pointer[snapshot.HealthCheck]
	stop   chan struct{}
	done   chan struct{}
	client *http.Client
	m      *Metrics
	log    *slog.Logger
}

// sync starts checkers for new (cluster, endpoint) pairs with a health
// check, updates the settings of running ones, and stops the rest (their
// endpoints count as healthy again).
func (cs *checkers) sync(clusters map[string]*Cluster) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = map[checkKey]*checker{}
	}
	want := map[checkKey]bool{}
	for _, c := range clusters {
		hc := c.Config.HealthCheck
		if hc == nil {
			continue
		}
		for _, ep := range c.endpoints {
			k := checkKey{c.Name, ep.Addr}
			want[k] = true
			if ck := cs.m[k]; ck != nil {
				ck.cfg.Store(hc)
				continue
			}
			ck := &checker{key: k, es: ep.state, stop: make(chan struct{}), done: make(chan struct{}), m: cs.metrics, log: cs.log}
			ck.cfg.Store(hc)
			ck.client = &http.Client{
				Transport: &http.Transport{
					DialContext:         (&net.Dialer{Timeout: time.Duration(hc.TimeoutMs) * time.Millisecond}).DialContext,
					DisableCompression:  true,
					MaxIdleConnsPerHost: 1,
				},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
			cs.m[k] = ck
			cs.metrics.EndpointHealthy.WithLabelValues(k.cluster, k.addr).Set(boolGauge(!ep.state.unhealthy.Load()))
			go ck.run()
		}
	}
	for k, ck := range cs.m {
		if !want[k] {
			ck.halt()
			ck.es.unhealthy.Store(false)
			cs.metrics.EndpointHealthy.DeleteLabelValues(k.cluster, k.addr)
			delete(cs.m, k)
		}
	}
}

func (cs *checkers) stopAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for k, ck := range cs.m {
		ck.halt()
		delete(cs.m, k)
	}
}

func (ck *checker) halt() {
	close(ck.stop)
	<-ck.done
	ck.client.CloseIdleConnections()
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// run checks at once, then every interval plus a random jitter, and flips
// the endpoint after healthy_threshold passes or unhealthy_threshold
// failures in a row.
func (ck *checker) run() {
	defer close(ck.done)
	passes, fails := 0, 0
	for {
		hc := ck.cfg.Load()
		ok := ck.check(hc)
		result := "fail"
		if ok {
			result = "pass"
			passes, fails = passes+1, 0
		} else {
			passes, fails = 0, fails+1
		}
		ck.m.HealthChecks.WithLabelValues(ck.key.cluster, result).Inc()
		unhealthy := ck.es.unhealthy.Load()
		switch {
		case unhealthy && passes >= hc.HealthyThreshold:
			ck.transition(false)
		case !unhealthy && fails >= hc.UnhealthyThreshold:
			ck.transition(true)
		}
		wait := time.Duration(hc.IntervalMs) * time.Millisecond
		if hc.JitterMs > 0 {
			wait += time.Duration(rand.Int64N(int64(hc.JitterMs)*int64(time.Millisecond) + 1))
		}
		t := time.NewTimer(wait)
		select {
		case <-ck.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (ck *checker) transition(unhealthy bool) {
	ck.es.unhealthy.Store(unhealthy)
	to := "healthy"
	if unhealthy {
		to = "unhealthy"
	}
	ck.m.HealthTransitions.WithLabelValues(ck.key.cluster, to).Inc()
	ck.m.EndpointHealthy.WithLabelValues(ck.key.cluster, ck.key.addr).Set(boolGauge(!unhealthy))
	ck.log.Warn("endpoint health changed", "cluster", ck.key.cluster, "endpoint", ck.key.addr, "now", to)
}

// check sends one GET and reports whether the status is an expected one
// (default 200..299) within the timeout.
func (ck *checker) check(hc *snapshot.HealthCheck) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(hc.TimeoutMs)*time.Millisecond)
	defer cancel()
	go func() {
		select {
		case <-ck.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+ck.key.addr+hc.Path, nil)
	if err != nil {
		return false
	}
	if hc.Host != "" {
		req.Host = hc.Host
	}
	req.Header.Set("User-Agent", "rampart-health-check")
	resp, err := ck.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	if len(hc.ExpectedStatuses) > 0 {
		return slices.Contains(hc.ExpectedStatuses, resp.StatusCode)
	}
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
