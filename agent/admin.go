package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/bpf"
)

// Handler serves the admin endpoints: /healthz, /readyz, /status, /metrics
// and, with anycast, anycast.StatusPath.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, why := a.Ready(); !ok {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.Status())
	})
	var g prometheus.Gatherer = a.reg
	if a.ac != nil {
		g = prometheus.Gatherers{a.reg, a.ac}
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST "+anycast.DrainPath, a.handleDrain(false))
	mux.HandleFunc("POST "+anycast.UndrainPath, a.handleDrain(true))
	mux.HandleFunc(anycast.StatusPath, func(w http.ResponseWriter, r *http.Request) {
		if a.ac == nil {
			http.Error(w, "anycast is off on this agent (no -anycast-config)", http.StatusNotFound)
			return
		}
		h := a.ac.handler()
		if h == nil {
			http.Error(w, "anycast: waiting for a snapshot with VIPs", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
	return mux
}

// Ready is true when XDP is attached to every interface and the maps and
// VIPs are in line with the active snapshot; why says what is missing.
func (a *Agent) Ready() (ok bool, why string) {
	if a.filter() == nil {
		return false, "BPF filter not open"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var missing []string
	for _, name := range a.c.Interfaces {
		if s := a.ifaces[name]; !s.attached {
			missing = append(missing, fmt.Sprintf("XDP not attached to %s: %s", name, s.err))
		}
	}
	switch {
	case a.active == nil:
		missing = append(missing, "no active snapshot")
	case a.st.err != "":
		missing = append(missing, "sync failing: "+a.st.err)
	case a.st.version != a.active.snap.Version || !a.st.haveDeny:
		missing = append(missing, "maps not yet in line with snapshot "+a.active.snap.Version.String())
	}
	return len(missing) == 0, strings.Join(missing, "; ")
}

// filtering is the anycast xdp input: XDP attached everywhere and the maps
// in line with the active snapshot within the last few seconds. Unlike
// Ready, a snapshot being applied right now does not count against it.
func (a *Agent) filtering() (bool, string) {
	if a.filter() == nil {
		return false, "BPF filter not open"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range a.c.Interfaces {
		if s := a.ifaces[name]; !s.attached {
			return false, fmt.Sprintf("XDP not attached to %s: %s", name, s.err)
		}
	}
	switch {
	case a.st.okAt.IsZero():
		return false, "maps never in line with a snapshot"
	case time.Since(a.st.okAt) > filterGrace:
		return false, fmt.Sprintf("maps not in line for %s: %s", time.Since(a.st.okAt).Round(time.Second), a.st.err)
	}
	return true, "synced " + a.st.version.String()
}

// filterGrace is how long sync passes may fail before the xdp input falls.
const filterGrace = 3 * time.Second

func (a *Agent) setReady() {
	ok, _ := a.Ready()
	a.m.ready.Set(b2f(ok))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (a *Agent) activeVersion() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == nil {
		return ""
	}
	return a.active.snap.Version.String()
}

// syncAge is the time since the maps were last confirmed in line (-1 s:
// never).
func (a *Agent) syncAge() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.okAt.IsZero() {
		return -time.Second
	}
	return time.Since(a.st.okAt)
}

func (a *Agent) snapshotAge() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.createdAt.IsZero() {
		return -time.Second
	}
	return time.Since(a.st.createdAt)
}

// MapFill is a map's entries and capacity (0: not bounded by the agent).
type MapFill struct {
	Entries  int `json:"entries"`
	Capacity int `json:"capacity,omitempty"`
}

// bpfState is what the BPF side shows in /status and /metrics.
type bpfState struct {
	Programs int                `json:"programs_loaded"`
	Links    []string           `json:"links"`
	Counters map[string]uint64  `json:"verdicts"`
	Maps     map[string]MapFill `json:"maps"`
	Error    string             `json:"error,omitempty"`
}

func (a *Agent) bpfView() bpfState {
	v := bpfState{Counters: map[string]uint64{}, Maps: map[string]MapFill{}}
	a.fmu.RLock()
	defer a.fmu.RUnlock()
	f := a.f
	if f == nil {
		return v
	}
	v.Programs, v.Links = 3, f.Attachments()
	if c, err := f.ReadCounters(); err != nil {
		v.Error = err.Error()
	} else {
		for r := range bpf.NumReasons {
			v.Counters[r.String()] = c[r]
		}
	}
	if s, err := a.colStats(f); err != nil {
		v.Error = err.Error()
	} else {
		v.Maps["sources"] = MapFill{s.Sources, s.MaxSources}
		v.Maps["conn_sources"] = MapFill{s.ConnSources, s.MaxConnSources}
	}
	a.mu.Lock()
	st := a.st
	a.mu.Unlock()
	var v4, v6 int
	d4, d6 := st.denyV4, len(st.deny)-st.denyV4 // st.deny's elements are the syncer's (edited in place)
	for _, x := range st.vips {
		if x.Addr.Is4() {
			v4++
		} else {
			v6++
		}
	}
	for _, x := range st.addrs { // one port-0 marker per address
		if x.Is4() {
			v4++
		} else {
			v6++
		}
	}
	maxVIPs := int(a.c.Maps.MaxVIPs)
	if maxVIPs == 0 {
		maxVIPs = 4096
	}
	v.Maps["deny_v4"], v.Maps["deny_v6"] = MapFill{Entries: d4}, MapFill{Entries: d6}
	v.Maps["vips_v4"], v.Maps["vips_v6"] = MapFill{v4, maxVIPs}, MapFill{v6, maxVIPs}
	if a.socks != nil {
		reg, _, _, _ := a.socks.snapshot()
		v.Maps["sockets"] = MapFill{len(reg), int(a.c.Maps.MaxSockets)}
	}
	return v
}

func (a *Agent) colStats(f *bpf.Filter) (bpf.Stats, error) { return a.col.cachedStats(f) }

// proxyLoop polls the proxy's /readyz (and, for anycast, its upstream
// health) every poll.
func (a *Agent) proxyLoop(ctx context.Context) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	t := time.NewTicker(a.c.Poll)
	defer t.Stop()
	var lastMetrics time.Time
	for {
		ready, detail := probeReady(ctx, client, "http://"+a.c.ProxyAdmin+"/readyz")
		a.mu.Lock()
		changed := a.proxy.ready != ready
		a.proxy.ready, a.proxy.detail = ready, detail
		a.mu.Unlock()
		a.m.proxyReady.Set(b2f(ready))
		if changed {
			a.log.Info("agent: proxy readiness changed", "ready", ready, "detail", detail)
		}
		if a.ac != nil {
			a.ac.setProxyReady(ready, detail)
			if time.Since(lastMetrics) >= time.Second {
				lastMetrics = time.Now()
				a.ac.pollUpstreams(ctx, client, "http://"+a.c.ProxyAdmin+"/metrics")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func probeReady(ctx context.Context, c *http.Client, url string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return false, err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
}
