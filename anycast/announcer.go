package anycast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options are the Announcer's collaborators; all are optional.
type Options struct {
	Registerer prometheus.Registerer // metrics; nil: not registered
	Logger     *slog.Logger          // nil: slog.Default()
	// Fleet is the control plane's view of which sites announce each VIP;
	// the guard merges it with what BGP peers send back.
	Fleet FleetView
	// Control is the control plane's view with its freshness: while fresh
	// it replaces BGP paths and Fleet as the guard's source of sites.
	Control ControlView
	// HTTPClient runs the http inputs; nil: a client without proxies or
	// keep-alives.
	HTTPClient *http.Client
}

// Announcer samples the health inputs, decides each VIP and keeps the BGP
// speaker's paths in line: announce, drain, hold (guard) or withdraw.
// Create it with New, feed inputs with Set*, then Start and Stop once.
type Announcer struct {
	fixed   *Config // as given to New: the parts Reconfigure may not change
	log     *slog.Logger
	m       *metrics
	fleet   FleetView
	control ControlView
	client  *http.Client
	reg     prometheus.Registerer

	mu          sync.Mutex
	cfg         Config // current (Reconfigure replaces it)
	eng         *engine
	applied     map[*vip]wire   // what is on the wire
	wireErr     map[*vip]string // the latest failure to put it there
	probes      map[string]context.CancelFunc
	drains      map[string][]VIPDrain // by source
	guardSource string                // where sites() counted from last
	started     bool
	stopping    bool

	sp      *speaker
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	probeWG sync.WaitGroup
	stop    sync.Once
}

// New checks cfg (normalising a copy) and builds an Announcer; nothing runs
// until Start.
func New(cfg Config, opts Options) (*Announcer, error) {
	cfg = cfg.clone()
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !*cfg.Guard.LearnFromBGP && opts.Fleet == nil && opts.Control == nil {
		return nil, errors.New("anycast guard has no way to see other sites (learn_from_bgp is off and there is no fleet view): it would hold every withdrawal")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	m, err := newMetrics(opts.Registerer, cfg.DryRun != DryRunOff)
	if err != nil {
		return nil, fmt.Errorf("register anycast metrics: %w", err)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	fixed := cfg.clone()
	a := &Announcer{fixed: &fixed, cfg: cfg, reg: opts.Registerer, log: log.With("component", "anycast"), m: m, fleet: opts.Fleet, control: opts.Control, client: client,
		eng: newEngine(&cfg, time.Now()), applied: map[*vip]wire{}, wireErr: map[*vip]string{}, probes: map[string]context.CancelFunc{}, drains: map[string][]VIPDrain{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	for _, v := range a.eng.vips {
		a.m.vipState.WithLabelValues(v.cfg.Prefix, string(StateWithdrawn)).Set(1)
		a.m.guardActive.WithLabelValues(v.cfg.Prefix).Set(0)
	}
	for _, in := range a.eng.inputs {
		a.m.inputUp.WithLabelValues(in.cfg.Name).Set(0)
	}
	return a, nil
}

// Start brings the BGP sessions up (unless dry_run is no_bgp) and starts
// sampling. VIPs are announced once their inputs have risen.
func (a *Announcer) Start(ctx context.Context) error {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		return errors.New("anycast announcer already started")
	}
	a.started = true
	a.mu.Unlock()
	f := a.fixed
	if f.DryRun != DryRunNoBGP {
		sp, err := startSpeaker(ctx, f, a.log, a.poke)
		if err != nil {
			a.mu.Lock()
			a.started = false // Stop must not wait for a loop that never ran
			a.mu.Unlock()
			return err
		}
		a.mu.Lock()
		a.sp = sp
		a.mu.Unlock()
	}
	a.mu.Lock()
	a.syncProbes()
	a.mu.Unlock()
	a.log.Info("anycast: started", "site", f.SiteID, "as", f.LocalAS, "router_id", f.RouterID,
		"peers", len(f.Peers), "vips", len(f.VIPs), "dry_run", f.DryRun)
	go a.loop()
	return nil
}

// Run is Start, then Stop when ctx ends (with the drain time plus 10 s to
// drain and close).
func (a *Announcer) Run(ctx context.Context) error {
	if err := a.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	a.mu.Lock()
	drain := a.eng.drain
	a.mu.Unlock()
	sctx, cancel := context.WithTimeout(context.Background(), drain+10*time.Second)
	defer cancel()
	return a.Stop(sctx)
}

// Stop drains every announced VIP (graceful-shutdown community and
// prepends for the drain time, or until ctx ends), then closes each session
// with Cease/Administrative Shutdown and the configured message. A planned
// stop is not held by the guard; it logs what the guard would have said.
// Stop unregisters the metrics, so a new Announcer may register after it.
func (a *Announcer) Stop(ctx context.Context) error {
	a.stop.Do(func() {
		a.mu.Lock()
		started := a.started
		a.eng.stopping, a.stopping = true, true
		for _, v := range a.eng.vips {
			if v.state == StateAnnounced || v.state == StateDraining {
				if ok, _, why := guardAllows(a.eng.self, a.eng.minSites, a.sites(v.prefix, a.eng.drainStart(v.prefix))); !ok {
					a.log.Warn("anycast: stopping although the guard would hold this VIP", "vip", v.cfg.Prefix, "guard", why)
				}
			}
		}
		msg := a.cfg.ShutdownMessage
		a.mu.Unlock()
		if !started {
			a.m.unregister(a.reg)
			return
		}
		a.poke()
		if a.fixed.DryRun == DryRunOff {
			a.waitDrained(ctx)
		}
		close(a.quit)
		<-a.done
		a.mu.Lock()
		for name, cancel := range a.probes {
			cancel()
			delete(a.probes, name)
		}
		a.mu.Unlock()
		a.probeWG.Wait()
		if a.sp != nil {
			a.sp.shutdown(ctx, msg)
		}
		a.m.sessionsUp.Set(0)
		a.m.unregister(a.reg)
		a.log.Info("anycast: stopped", "message", msg)
	})
	return nil
}

// waitDrained waits until every VIP is drained and on the wire so, or ctx ends.
func (a *Announcer) waitDrained(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		a.mu.Lock()
		done := a.eng.drained(time.Now()) && a.onWire()
		a.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ctx.Done():
			a.log.Warn("anycast: stop deadline before the drain ended", "err", ctx.Err())
			return
		case <-t.C:
		}
	}
}

// onWire says whether every VIP's path is what its state wants. Callers hold mu.
func (a *Announcer) onWire() bool {
	for _, v := range a.eng.all() {
		if want := a.desired(v); a.applied[v].key != want.key || a.applied[v].r != want.r {
			return false
		}
	}
	return true
}
