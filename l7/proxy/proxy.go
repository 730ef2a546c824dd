package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/listener"
	"github.com/rampart-edge/rampart/l7/region"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/tickets"
)

// Options configure a proxy process (the snapshot configures the rest).
type Options struct {
	// AccessLog receives one JSON line per request; nil turns it off.
	AccessLog io.Writer
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Region is where this proxy runs: endpoints in the same region are
	// preferred while any of them is available.
	Region string
	// Regional is the region state the regional routing policy decides
	// under (the daemon's region-state watcher sets it); nil: the proxy
	// keeps its own, without a state until SetRegionState.
	Regional *region.Live
	// Sockets, when set, gives the listeners their sockets (inherited
	// across a graceful re-exec); nil binds them directly.
	Sockets listener.SocketSource
	// Tickets gives the TLS session ticket keys; nil keeps them in this
	// process (every listener generation still shares them and they
	// rotate as the snapshot says). The daemon passes the node's state
	// file so its proxies share the keys.
	Tickets *tickets.Source
}

// Proxy serves traffic from the active runtime.
type Proxy struct {
	active      atomic.Pointer[Runtime]
	metrics     *Metrics
	clusters    *cluster.Set
	region      string
	regional    *region.Live // the region state the regional policy decides under
	inflight    atomic.Int64 // requests in flight (limits.max_concurrent_requests)
	tunnels     tunnelSet    // upgraded (WebSocket) connections
	denyList    atomic.Pointer[deny.List]
	handoffGen  uint64 // changes with every applied snapshot (guarded by mu)
	accessLog   *accesslog.Log
	tracer      *gatewayTracer
	errLog      *slog.Logger
	stdErrorLog *log.Logger

	mu        sync.Mutex // serialises Apply and Shutdown
	listeners map[string]*listener.Listener
	stopped   bool
	draining  atomic.Bool

	versions sourceVersions
	sockets  listener.SocketSource
	tickets  *tickets.Source // TLS session ticket keys (l7/tickets)
}

type sourceVersions struct {
	mu         sync.Mutex
	desired    snapshot.Version
	downloaded snapshot.Version
}

// New returns a proxy with no active snapshot; it serves nothing until Apply.
func New(o Options) *Proxy {
	lg := o.Logger
	if lg == nil {
		lg = slog.Default()
	}
	m := NewMetrics()
	p := &Proxy{metrics: m, errLog: lg, listeners: map[string]*listener.Listener{}, region: o.Region, sockets: o.Sockets,
		stdErrorLog: slog.NewLogLogger(lg.Handler(), slog.LevelWarn), tickets: o.Tickets}
	if p.tickets == nil {
		p.tickets, _ = tickets.New("") // in memory: cannot fail
	}
	p.clusters = cluster.NewSet(m.cluster, lg, o.Region)
	if p.regional = o.Regional; p.regional == nil {
		p.regional = region.NewLive(nil)
	}
	p.accessLog = accesslog.New(o.AccessLog, m.Registry)
	p.tracer = newGatewayTracer(m.Registry, lg)
	m.registerSnapshotGauges(p)
	m.registerUpstreamStale()
	return p
}

// SetRegionState makes s the region state in force (nil: none, every
// regional signal unknown); the active snapshot's policy decides under it
// from the next request on.
func (p *Proxy) SetRegionState(s *regionstate.State) { p.regional.Set(s) }

// Metrics returns the proxy's metrics.
func (p *Proxy) Metrics() *Metrics { return p.metrics }

// Active returns the active runtime, or nil.
func (p *Proxy) Active() *Runtime { return p.active.Load() }

// ErrStale is returned by Apply for a snapshot that is not newer than the
// active one.
var ErrStale = errors.New("snapshot is not newer than the active one")

// Apply builds a runtime from a verified snapshot, opens or updates its
// listeners, and makes it active. Requests already in flight finish on the
// runtime they started with. On any error the active runtime and listeners
// are left as they were.
func (p *Proxy) Apply(s *snapshot.Snapshot) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return errors.New("proxy is shut down")
	}
	prev := p.active.Load()
	if prev != nil && !prev.Snap.Version.Less(s.Version) {
		return fmt.Errorf("%w: %s is active, got %s", ErrStale, prev.Snap.Version, s.Version)
	}
	rt, err := buildRuntime(s, &runtimeEnv{proxy: p, clusters: p.clusters, metrics: p.metrics, deny: &p.denyList, region: p.region, log: p.errLog}, prev)
	if err != nil {
		return err
	}
	// The ticket rotation before any listener takes keys (back if the
	// snapshot is refused): a passing default would re-base the node's
	// shared key chain twice.
	prevRotation := p.tickets.Rotation()
	p.tickets.SetRotation(time.Duration(s.Config.TicketRotationMs()) * time.Millisecond)
	// Open new listeners first: a bind failure rejects the snapshot.
	opened := map[string]*listener.Listener{}
	for _, lc := range s.Config.Listeners {
		if old := p.listeners[lc.Name]; old != nil && old.Address() == lc.Address {
			continue
		}
		l, err := listener.Listen(lc, p.listenerEnv())
		if err != nil {
			for _, o := range opened {
				o.Close(context.Background())
			}
			rt.closePolicies()
			p.tickets.SetRotation(prevRotation)
			return err
		}
		opened[lc.Name] = l
	}
	p.active.Store(rt)
	p.handoffGen++
	if prev != nil {
		prev.closePolicies() // its key caches and buckets live on in rt
	}
	p.metrics.snapSwaps.Inc()
	p.configureTelemetry(s.Config.Telemetry)
	var retired []*listener.Listener
	for _, lc := range s.Config.Listeners {
		if l := opened[lc.Name]; l != nil {
			if old := p.listeners[lc.Name]; old != nil {
				retired = append(retired, old)
			}
			p.listeners[lc.Name] = l
			continue
		}
		if err := p.listeners[lc.Name].Update(lc); err != nil {
			p.errLog.Error("listener settings not updated", "listener", lc.Name, "err", err)
		}
	}
	for name, l := range p.listeners {
		if _, ok := rt.listeners[name]; !ok {
			retired = append(retired, l)
			delete(p.listeners, name)
		}
	}
	for _, l := range retired {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), listener.DrainTimeout)
			defer cancel()
			l.Close(ctx)
		}()
	}
	p.clusters.Retain(rt.clusters)
	p.errLog.Info("snapshot active", "version", s.Version.String(), "sha256", s.DigestHex(),
		"routes", len(s.Config.Routes), "clusters", len(s.Config.Clusters))
	return nil
}

// listenerEnv is what the proxy's listeners serve with (read when one is
// opened).
func (p *Proxy) listenerEnv() *listener.Env {
	return &listener.Env{
		Handler:     func(name string) http.Handler { return &entry{p: p, listener: name} },
		Certificate: p.certificate,
		Refused:     p.refused,
		Metrics:     p.metrics.listener,
		Log:         p.errLog,
		ErrorLog:    p.stdErrorLog,
		Sockets:     p.sockets,
		Tickets:     p.tickets,
	}
}

// certificate picks a listener's certificate from the active snapshot.
func (p *Proxy) certificate(name string, hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	rt := p.active.Load()
	if rt == nil {
		return nil, errors.New("no active snapshot")
	}
	lr := rt.listeners[name]
	if lr == nil || lr.certs == nil {
		return nil, fmt.Errorf("listener %q has no certificates in snapshot %s", name, rt.Snap.Version)
	}
	return lr.certs.Get(hello.ServerName), nil
}

// ListenerAddr returns the bound address of a listener by name (useful when
// the config asked for port 0).
func (p *Proxy) ListenerAddr(name string) (net.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.listeners[name]
	if l == nil {
		return nil, false
	}
	return l.Addr(), true
}

// SetSourceVersions records what the snapshot source has seen: the newest
// version announced (desired) and the newest verified (downloaded).
func (p *Proxy) SetSourceVersions(desired, downloaded snapshot.Version) {
	p.versions.mu.Lock()
	defer p.versions.mu.Unlock()
	if p.versions.desired.Less(desired) {
		p.versions.desired = desired
	}
	if p.versions.downloaded.Less(downloaded) {
		p.versions.downloaded = downloaded
	}
}

// SetDenyList makes a verified deny list the one requests are checked
// against (the daemon's deny.Watcher calls it).
func (p *Proxy) SetDenyList(l *deny.List) {
	p.denyList.Store(l)
	p.metrics.denySequence.Set(float64(l.Sequence()))
	p.metrics.denyEntries.Set(float64(l.Len()))
}

// RejectDenyList counts a refused deny list by reason.
func (p *Proxy) RejectDenyList(reason string) { p.metrics.denyRejected.WithLabelValues(reason).Inc() }

// RejectSnapshot counts a refused snapshot file by reason.
func (p *Proxy) RejectSnapshot(reason string) { p.metrics.snapRejected.WithLabelValues(reason).Inc() }

// Shutdown stops accepting, marks the proxy unready, lets in-flight requests
// finish until ctx ends, then closes upstream pools and the access log.
func (p *Proxy) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	p.draining.Store(true)
	ls := p.listeners
	p.listeners = map[string]*listener.Listener{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() { defer wg.Done(); l.Close(ctx) }()
	}
	wg.Wait()
	p.tunnels.closeAll()
	if rt := p.active.Load(); rt != nil {
		rt.closePolicies()
	}
	p.clusters.Close()
	p.accessLog.Close()
	p.shutdownTelemetry(ctx)
	return ctx.Err()
}

func (m *Metrics) registerSnapshotGauges(p *Proxy) {
	ver := func(f func(*Runtime) float64) func() float64 {
		return func() float64 {
			if rt := p.active.Load(); rt != nil {
				return f(rt)
			}
			return 0
		}
	}
	m.Registry.MustRegister(
		newGaugeFunc("rampart_snapshot_active_epoch", "Epoch of the active snapshot (0: none).",
			ver(func(rt *Runtime) float64 { return float64(rt.Snap.Version.Epoch) })),
		newGaugeFunc("rampart_snapshot_active_sequence", "Sequence of the active snapshot.",
			ver(func(rt *Runtime) float64 { return float64(rt.Snap.Version.Sequence) })),
		newGaugeFunc("rampart_snapshot_age_seconds", "Seconds since the active snapshot was built.",
			ver(func(rt *Runtime) float64 { return time.Since(rt.Snap.CreatedAt).Seconds() })),
		newGaugeFunc("rampart_snapshot_active_seconds", "Seconds since the active snapshot was activated.",
			ver(func(rt *Runtime) float64 { return time.Since(rt.activated).Seconds() })),
		newGaugeFunc("rampart_routes", "Routes in the active snapshot.",
			ver(func(rt *Runtime) float64 { return float64(len(rt.routes)) })),
		newGaugeFunc("rampart_websocket_tunnels", "Upgraded (WebSocket) connections open.",
			func() float64 { return float64(p.tunnels.len()) }),
		newGaugeFunc("rampart_requests_in_flight", "Requests in flight (limits.max_concurrent_requests).",
			func() float64 { return float64(p.inflight.Load()) }),
	)
}
