package agent

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/denywatch"
	"github.com/rampart-edge/rampart/l7/regionwatch"
	"github.com/rampart-edge/rampart/l7/snapdir"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Agent is one run of the node agent. Create it with New, then Run it once.
type Agent struct {
	c   Config
	log *slog.Logger
	reg *prometheus.Registry
	m   *metrics
	col *bpfCollector

	fmu sync.RWMutex
	f   *bpf.Filter // nil outside Run

	vips       *VIPs
	socks      *socketFollower
	snaps      *snapdir.Watcher
	deny       *denywatch.Watcher
	ac         *anycastFeed         // nil without anycast
	rs         *regionwatch.Watcher // nil without -region-state
	rg         *regionGuard
	rk         *regionKeeper
	drains     *operatorDrains
	adminToken []byte // sha256 of the admin token; nil: writes refused

	denyStage denyStager // a new deny list streamed into fresh tries (denysync.go)

	kick     chan struct{} // wakes the syncer
	sockKick chan struct{} // wakes the socket follower

	mu     sync.Mutex
	active *activeSnap
	source struct{ desired, downloaded snapshot.Version }
	ifaces map[string]*ifaceState
	st     syncState
	proxy  struct {
		ready  bool
		detail string
	}
	fastSocks time.Time // poll the proxy's sockets quickly until then
}

type activeSnap struct {
	snap *snapshot.Snapshot
	l4   l4
}

type ifaceState struct {
	mode     bpf.XDPMode
	attached bool
	err      string
	warned   bool
}

// New checks c and fills its defaults; nothing happens until Run.
func New(c Config) (*Agent, error) {
	if err := c.setDefaults(); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	a := &Agent{c: c, log: c.Logger, reg: prometheus.NewRegistry(), kick: make(chan struct{}, 1),
		sockKick: make(chan struct{}, 1), ifaces: map[string]*ifaceState{}}
	for _, name := range c.Interfaces {
		a.ifaces[name] = &ifaceState{}
	}
	a.m = newMetrics(a.reg, a)
	a.vips = &VIPs{Iface: c.VIPInterface, StateFile: filepath.Join(c.StateDir, "vips.json")}
	a.snaps = &snapdir.Watcher{Dir: c.SnapshotDir, StateDir: c.StateDir, PublicKey: c.PublicKey,
		Interval: c.Poll, Target: target{a}, Log: c.Logger}
	if c.DenyFile != "" {
		a.deny = &denywatch.Watcher{Path: c.DenyFile, StatePath: filepath.Join(c.StateDir, "deny-state.json"),
			PublicKey: c.PublicKey, Interval: min(denywatch.DefaultInterval, c.Poll), Logger: c.Logger,
			OnReject: func(r string) { a.m.denyRejected.WithLabelValues(r).Inc() },
			OnApply:  func(*deny.List) { a.wake() }, Parse: a.parseDeny}
	}
	a.rg = &regionGuard{region: c.Region, groups: c.TenantGroups}
	a.rk = &regionKeeper{a: a}
	a.drains = &operatorDrains{path: filepath.Join(c.StateDir, drainsFile)}
	if err := a.drains.load(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if c.AdminToken != "" {
		sum := sha256.Sum256([]byte(c.AdminToken))
		a.adminToken = sum[:]
	}
	if c.RegionState != "" {
		w, err := regionwatch.New(regionwatch.Config{Path: c.RegionState, StatePath: filepath.Join(c.StateDir, "region-state.json"),
			PublicKey: c.PublicKey, MaxAge: c.RegionStateMaxAge, Interval: c.Poll, Logger: c.Logger})
		if err != nil {
			return nil, fmt.Errorf("agent config: %w", err)
		}
		if err := w.Register(a.reg); err != nil {
			return nil, fmt.Errorf("agent: region-state metrics: %w", err)
		}
		a.rs, a.rg.state = w, w
	}
	if c.Anycast != nil {
		if err := checkRegionInputs(c.Anycast, c.Region, c.TenantGroups); err != nil {
			return nil, fmt.Errorf("agent config: %w", err)
		}
		a.ac = newAnycastFeed(a, *c.Anycast)
	}
	return a, nil
}

// Registry is the agent's Prometheus registry (served on /metrics).
func (a *Agent) Registry() *prometheus.Registry { return a.reg }

// Run starts the agent and keeps the kernel in line with the active
// snapshot until ctx ends; then, with anycast, it drains and shuts BGP
// down, removes its VIPs (unless KeepVIPs) and closes the filter without
// unpinning: XDP keeps filtering and the next agent takes over.
func (a *Agent) Run(ctx context.Context) error {
	if err := Preflight(a.c.PinRoot); err != nil {
		return err
	}
	if err := os.MkdirAll(a.c.StateDir, 0o700); err != nil {
		return fmt.Errorf("agent state dir: %w", err)
	}
	// The admin listener comes first: /healthz and /metrics answer while the
	// filter opens and the first sync runs (a million deny prefixes take
	// seconds); /readyz says why it is not ready until then.
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(ctx, "tcp", a.c.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listener on %s: %w", a.c.AdminAddr, err)
	}
	admin := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = admin.Serve(ln) }()
	defer admin.Close()
	if a.c.Started != nil {
		a.c.Started(ln.Addr())
	}
	f, err := bpf.Open(a.c.PinRoot, &a.c.Maps)
	if err != nil {
		return fmt.Errorf("open BPF filter: %w", err)
	}
	a.fmu.Lock()
	a.f = f
	a.fmu.Unlock()
	defer a.closeFilter()
	a.detachStale()
	a.attachAll()
	if err := f.AttachSkLookup(a.c.Netns); err != nil {
		return fmt.Errorf("socket steering: %w", err)
	}
	if err := f.AttachConnTracker(a.c.Cgroup); err != nil {
		return fmt.Errorf("connection tracker: %w", err)
	}
	a.socks = &socketFollower{path: a.c.HandoffSocket, m: f, keep: a.steered,
		idx: newSocketIndexes(filepath.Join(a.c.StateDir, "sockets.json"), a.c.Maps.MaxSockets)}

	// Kernel state is touched only once the snapshot (and the sockets it
	// steers to) are known, so a restart never writes a half picture.
	if err := a.snaps.LoadLastKnownGood(); err != nil {
		a.log.Error("agent: last-known-good snapshot not used", "err", err)
	}
	a.snaps.Scan()
	if a.deny != nil {
		if err := a.deny.LoadState(); err != nil {
			a.log.Error("agent: deny list state not used", "err", err)
		}
	}
	if a.rs != nil {
		if err := a.rs.LoadState(); err != nil {
			a.log.Error("agent: region state not used", "err", err)
		}
	}
	if a.activeVersion() == "" {
		a.log.Warn("agent: no active snapshot yet: the maps are left as found and /readyz is unready until one arrives",
			"dir", a.c.SnapshotDir)
	}
	a.fetchSockets(ctx)
	a.syncOnce(true)
	a.log.Info("rampart agent started", "admin", ln.Addr().String(), "interfaces", a.c.Interfaces,
		"pin_root", a.c.PinRoot, "active", a.activeVersion())

	// The loops stop after anycast has drained, so steering, filtering and
	// health stay live during the drain.
	lctx, stopLoops := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(f func(context.Context)) { wg.Add(1); go func() { defer wg.Done(); f(lctx) }() }
	run(func(c context.Context) { _ = a.snaps.Run(c) })
	if a.deny != nil {
		run(func(c context.Context) { _ = a.deny.Run(c) })
	}
	if a.rs != nil {
		run(func(c context.Context) { _ = a.rs.Run(c) })
		if a.ac != nil {
			run(a.regionDrainLoop)
		}
	}
	run(a.syncLoop)
	run(a.socketLoop)
	if a.c.ProxyAdmin != "" {
		run(a.proxyLoop)
	}
	<-ctx.Done()
	var errs []error
	if a.ac != nil {
		errs = append(errs, a.ac.stop())
	}
	stopLoops()
	wg.Wait()
	if a.c.KeepVIPs {
		a.vips.Release()
		a.log.Info("agent: stopping, VIPs kept for the next agent", "vips", len(a.vips.Added()))
	} else if err := a.vips.Close(); err != nil {
		errs = append(errs, fmt.Errorf("remove VIPs: %w", err))
	}
	a.log.Info("agent: stopped; XDP and steering stay attached (pinned under " + a.c.PinRoot + ")")
	return errors.Join(errs...)
}

// detachStale removes XDP from interfaces a previous agent attached to
// that are no longer configured.
func (a *Agent) detachStale() {
	for _, l := range a.f.Attachments() {
		name, ok := strings.CutPrefix(l, "xdp-driver-")
		if !ok {
			name, ok = strings.CutPrefix(l, "xdp-generic-")
		}
		if !ok || slices.Contains(a.c.Interfaces, name) {
			continue
		}
		if err := a.f.DetachXDP(name); err != nil {
			a.log.Error("agent: cannot detach XDP from an interface no longer configured", "interface", name, "err", err)
		} else {
			a.log.Warn("agent: detached XDP from an interface no longer configured", "interface", name)
		}
	}
}

func (a *Agent) closeFilter() {
	a.fmu.Lock()
	defer a.fmu.Unlock()
	if s := a.denyStage.take(); s != nil {
		s.load.Abort()
	}
	if a.f != nil {
		_ = a.f.Close()
		a.f = nil
	}
}

func (a *Agent) filter() *bpf.Filter {
	a.fmu.RLock()
	defer a.fmu.RUnlock()
	return a.f
}

// wake asks the syncer for a pass now.
func (a *Agent) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Teardown detaches and unpins everything under c.PinRoot and removes the
// VIPs an agent with this state dir added: protection stops.
func Teardown(c Config) error {
	if c.PinRoot == "" {
		c.PinRoot = bpf.DefaultPinRoot
	}
	if c.VIPInterface == "" {
		c.VIPInterface = DefaultVIPInterface
	}
	var errs []error
	if err := Preflight(c.PinRoot); err != nil {
		return err
	}
	if _, err := os.Stat(c.PinRoot); err == nil {
		f, err := bpf.Open(c.PinRoot, &c.Maps)
		if err == nil {
			errs = append(errs, f.Remove())
		} else {
			// Maps of another size: dropping the pins detaches the links
			// all the same (nothing else holds them).
			errs = append(errs, os.RemoveAll(c.PinRoot))
		}
	}
	if c.StateDir != "" {
		v := &VIPs{Iface: c.VIPInterface, StateFile: filepath.Join(c.StateDir, "vips.json")}
		errs = append(errs, v.Close())
	}
	return errors.Join(errs...)
}
