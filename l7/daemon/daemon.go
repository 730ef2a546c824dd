// Package daemon runs a proxy process: the snapshot watcher, the proxy
// itself, the admin listener, and a clean drain when the context ends.
package daemon

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/rampart-edge/rampart/l7/denywatch"
	"github.com/rampart-edge/rampart/l7/handoff"
	"github.com/rampart-edge/rampart/l7/listener"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/purgewatch"
	"github.com/rampart-edge/rampart/l7/region"
	"github.com/rampart-edge/rampart/l7/regionwatch"
	"github.com/rampart-edge/rampart/l7/snapdir"
	"github.com/rampart-edge/rampart/l7/tickets"
)

// Config of a proxy process.
type Config struct {
	SnapshotDir string
	StateDir    string
	PublicKey   ed25519.PublicKey
	AdminAddr   string        // default 127.0.0.1:9901
	Pprof       bool          // serve /debug/pprof/ on the admin listener (default off: 404)
	AccessLog   io.Writer     // nil: off
	Poll        time.Duration // snapshot dir poll period, default 250ms
	// DrainTimeout overrides the active snapshot's limits.drain_timeout_ms
	// when set.
	DrainTimeout time.Duration
	// UnreadyDelay is how long /readyz reports unready before listeners
	// stop accepting, so load balancers stop sending first. Default 0.
	UnreadyDelay time.Duration
	Logger       *slog.Logger
	// Region is where this node runs: same-region endpoints are preferred.
	Region string
	// HandoffSocket, when set, is a unix socket where the node agent fetches
	// the proxy's listening sockets to steer VIP traffic to them.
	HandoffSocket string
	// DenyFile is the fast deny channel's signed list, watched and applied
	// within a second ("" disables it); the last good list is kept in
	// StateDir and used at start.
	DenyFile string
	// RegionStateFile is the signed region-state document (rampart
	// regionstate build), watched and applied within a second ("" : none,
	// every regional signal unknown); the last good one is kept in
	// StateDir as region-state.json and used at start. RegionStateMaxAge
	// bounds its age (default 30 s; regionwatch.MinMaxAge..MaxMaxAge).
	RegionStateFile   string
	RegionStateMaxAge time.Duration
	// PurgeFile is the signed cache purge document (rampart purge),
	// watched and applied within a second ("" : none); the last good one
	// is kept in StateDir as purge-state.json.
	PurgeFile string
	// TicketStateFile is the TLS session ticket key state (l7/tickets),
	// shared by the node's proxies that name the same file ("" : keys
	// kept in this process only).
	TicketStateFile string
	// ListenOverrides replaces the address of the snapshot's listener of
	// that name on this node only (several nodes on one host, a port per
	// node); /status shows both and the bound address.
	ListenOverrides map[string]string
	// ControlStatus, when set, is shown in /status as "control" (the node
	// client's view of its control plane).
	ControlStatus func() any
	// Sockets, when set, gives the snapshot's listeners their sockets
	// (cmd/rampart: inherited across a graceful re-exec); nil binds them.
	Sockets listener.SocketSource
	// AdminListen, when set, opens the admin listener (cmd/rampart:
	// inherited across a graceful re-exec); nil binds AdminAddr.
	AdminListen func(addr string) (net.Listener, error)
	// UpgradeStatus, when set, is shown in /status as "upgrade".
	UpgradeStatus func() any
	// Started, when set, is called once the admin listener is up and the
	// first scan is done.
	Started func(p *proxy.Proxy, admin net.Addr)
}

// Run serves until ctx ends, then drains and returns.
func Run(ctx context.Context, c Config) error {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	if c.AdminAddr == "" {
		c.AdminAddr = "127.0.0.1:9901"
	}
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return errors.New("a snapshot public key is required")
	}
	var rs *regionwatch.Watcher
	live := region.NewLive(nil) // what the regional policy decides under
	if c.RegionStateFile != "" {
		rc := regionwatch.Config{Path: c.RegionStateFile, PublicKey: c.PublicKey, MaxAge: c.RegionStateMaxAge, Logger: log,
			OnApply: live.Set}
		if c.StateDir != "" {
			rc.StatePath = filepath.Join(c.StateDir, "region-state.json")
		}
		var err error
		if rs, err = regionwatch.New(rc); err != nil {
			return err
		}
		live.SetMaxAge(rs.MaxAge()) // the decision uses the stricter of this and the snapshot's bound
		if err := rs.LoadState(); err != nil {
			log.Error("region state not used", "err", err)
		}
	}
	var tk *tickets.Source
	if c.TicketStateFile != "" {
		var err error
		if tk, err = tickets.New(c.TicketStateFile); err != nil {
			return fmt.Errorf("TLS session tickets: %w", err)
		}
	}
	p := proxy.New(proxy.Options{AccessLog: c.AccessLog, Logger: log, Region: c.Region, Regional: live, Sockets: c.Sockets, Tickets: tk})
	if rs != nil {
		if err := rs.Register(p.Metrics().Registry); err != nil {
			return fmt.Errorf("region-state metrics: %w", err)
		}
	}
	ov := &overrides{to: c.ListenOverrides}
	for name, addr := range c.ListenOverrides {
		log.Info("listener address overridden on this node", "listener", name, "address", addr)
	}
	w := &snapdir.Watcher{Dir: c.SnapshotDir, StateDir: c.StateDir, PublicKey: c.PublicKey,
		Interval: c.Poll, Target: overrideTarget{p, ov, log}, Log: log}
	if err := w.LoadLastKnownGood(); err != nil {
		log.Error("last-known-good snapshot not used", "err", err)
	}

	var aln net.Listener
	var err error
	if c.AdminListen != nil {
		aln, err = c.AdminListen(c.AdminAddr)
	} else {
		lc := net.ListenConfig{}
		lc.SetMultipathTCP(false)
		aln, err = lc.Listen(ctx, "tcp", c.AdminAddr)
	}
	if err != nil {
		shutdown(p, time.Second)
		return fmt.Errorf("admin listener on %s: %w", c.AdminAddr, err)
	}
	status := func() Status {
		st := nodeStatus(p, w, ov, rs, c.ControlStatus)
		if c.UpgradeStatus != nil {
			st.Upgrade = c.UpgradeStatus()
		}
		return st
	}
	handler := adminHandler(p, status)
	if c.Pprof {
		handler = proxy.WithPprof(handler)
	}
	admin := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = admin.Serve(aln) }()

	wctx, stopWatch := context.WithCancel(context.Background())
	denyDone := make(chan struct{})
	if c.DenyFile != "" {
		dw := &denywatch.Watcher{Path: c.DenyFile, PublicKey: c.PublicKey, Logger: log,
			OnApply: p.SetDenyList, OnReject: p.RejectDenyList}
		if c.StateDir != "" {
			dw.StatePath = filepath.Join(c.StateDir, "deny-state.json")
		}
		if err := dw.LoadState(); err != nil {
			log.Error("deny list state not used", "err", err)
		}
		go func() { defer close(denyDone); _ = dw.Run(wctx) }()
	} else {
		close(denyDone)
	}
	purgeDone := make(chan struct{})
	if c.PurgeFile != "" {
		pc := purgewatch.Config{Path: c.PurgeFile, PublicKey: c.PublicKey, Logger: log, Store: p.CacheStore}
		if c.StateDir != "" {
			pc.StatePath = filepath.Join(c.StateDir, "purge-state.json")
		}
		if pw, err := purgewatch.New(pc); err != nil {
			log.Error("cache purges off", "err", err)
			close(purgeDone)
		} else {
			if err := pw.LoadState(); err != nil {
				log.Error("purge state not used", "err", err)
			}
			go func() { defer close(purgeDone); _ = pw.Run(wctx) }()
		}
	} else {
		close(purgeDone)
	}
	regionDone := make(chan struct{})
	if rs != nil {
		go func() { defer close(regionDone); _ = rs.Run(wctx) }()
	} else {
		close(regionDone)
	}
	handoffDone := make(chan struct{})
	if c.HandoffSocket != "" {
		hs := &handoff.Server{Path: c.HandoffSocket, Sockets: p.HandoffSockets}
		go func() {
			defer close(handoffDone)
			if err := hs.Run(wctx); err != nil {
				log.Error("socket hand-off stopped", "err", err)
			}
		}()
	} else {
		close(handoffDone)
	}
	watchDone := make(chan struct{})
	if c.SnapshotDir != "" {
		w.Scan()
		go func() { defer close(watchDone); _ = w.Run(wctx) }()
	} else {
		close(watchDone)
	}
	if p.Active() == nil {
		log.Warn("no active snapshot yet: serving 503 until one arrives", "dir", c.SnapshotDir)
	}
	if c.Started != nil {
		c.Started(p, aln.Addr())
	}
	<-ctx.Done()
	drain := c.DrainTimeout
	if drain <= 0 {
		drain = p.DrainTimeout()
	}
	log.Info("draining", "timeout", drain.String(), "unready_first", c.UnreadyDelay.String())
	stopWatch()
	<-watchDone
	<-denyDone
	<-purgeDone
	<-regionDone
	<-handoffDone
	p.MarkDraining()
	if c.UnreadyDelay > 0 {
		time.Sleep(c.UnreadyDelay)
	}
	err = shutdown(p, drain)
	_ = admin.Close()
	if err != nil {
		return fmt.Errorf("drain did not finish within %s: %w", drain, err)
	}
	log.Info("stopped")
	return nil
}

func shutdown(p *proxy.Proxy, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.Shutdown(ctx)
}
