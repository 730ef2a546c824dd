package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func newGaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// Status is the JSON served on the admin /status endpoint.
type Status struct {
	DesiredVersion    string  `json:"desired_version"`
	DownloadedVersion string  `json:"downloaded_version"`
	ActiveVersion     string  `json:"active_version"`
	ActiveSHA256      string  `json:"active_sha256,omitempty"`
	SnapshotAgeSecs   float64 `json:"snapshot_age_seconds"`
	ActivatedAt       string  `json:"activated_at,omitempty"`
	Routes            int     `json:"routes"`
	Clusters          int     `json:"clusters"`
	Ready             bool    `json:"ready"`
}

// Status reports versions and the active snapshot.
func (p *Proxy) Status() Status {
	p.versions.mu.Lock()
	st := Status{DesiredVersion: p.versions.desired.String(), DownloadedVersion: p.versions.downloaded.String()}
	p.versions.mu.Unlock()
	st.ActiveVersion = "0.0"
	if rt := p.active.Load(); rt != nil {
		st.ActiveVersion = rt.Snap.Version.String()
		st.ActiveSHA256 = rt.Snap.DigestHex()
		st.SnapshotAgeSecs = time.Since(rt.Snap.CreatedAt).Seconds()
		st.ActivatedAt = rt.activated.UTC().Format(time.RFC3339Nano)
		st.Routes = len(rt.routes)
		st.Clusters = len(rt.clusters)
	}
	st.Ready = p.Ready()
	return st
}

// Ready is true with an active snapshot and not draining.
func (p *Proxy) Ready() bool { return p.active.Load() != nil && !p.draining.Load() }

// AdminHandler serves /healthz, /readyz, /metrics and /status (not
// /debug/pprof: see WithPprof).
func (p *Proxy) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !p.Ready() {
			http.Error(w, "not ready: no active snapshot or draining", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.metrics.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(p.Status())
	})
	return mux
}

// WithPprof serves Go's profiler under /debug/pprof/ (the index, named
// profiles, cmdline, profile, symbol, trace) in front of h. The admin
// listener has it only when the operator asks (rampart proxy -pprof):
// profiles expose the process's memory layout and command line, and a CPU
// profile or trace costs CPU while it runs.
func WithPprof(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// DrainTimeout is the active snapshot's limits.drain_timeout_ms (30 s
// without a snapshot).
func (p *Proxy) DrainTimeout() time.Duration {
	if rt := p.active.Load(); rt != nil {
		return time.Duration(rt.limits.DrainTimeoutMs) * time.Millisecond
	}
	return 30 * time.Second
}

// MarkDraining makes /readyz report unready ahead of Shutdown.
func (p *Proxy) MarkDraining() { p.draining.Store(true) }
