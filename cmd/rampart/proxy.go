package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rampart-edge/rampart/l7/daemon"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/regionwatch"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func cmdProxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ExitOnError)
	dir := fs.String("snapshot-dir", "/var/lib/rampart/snapshots", "directory watched for *.snap files")
	state := fs.String("state-dir", "/var/lib/rampart/proxy", "where the last-known-good snapshot is kept")
	pubPath := fs.String("public-key", "/etc/rampart/snapshot.pub", "Ed25519 public key that signs snapshots (PEM)")
	admin := fs.String("admin", "127.0.0.1:9901", "admin listener: /healthz /readyz /metrics /status")
	pprofOn := fs.Bool("pprof", false, "also serve Go's profiler on the admin listener under /debug/pprof/")
	accessLog := fs.String("access-log", "stdout", "access log: stdout, stderr, off, or a file path")
	poll := fs.Duration("poll", 250*time.Millisecond, "snapshot dir poll period")
	drain := fs.Duration("drain-timeout", 0, "time in-flight requests get on SIGTERM (default: the snapshot's limits.drain_timeout_ms)")
	unready := fs.Duration("unready-delay", 0, "how long /readyz reports unready before listeners stop accepting on SIGTERM")
	region := fs.String("region", "", "this node's region: same-region endpoints are preferred")
	handoffSock := fs.String("handoff-socket", "", "unix socket where the node agent fetches the listening sockets (e.g. /run/rampart/handoff.sock)")
	denyFile := fs.String("deny-file", "", "signed deny list (rampart deny build) watched and applied within a second (default with -control-url: <state-dir>/deny.json)")
	regionState := fs.String("region-state", "", "signed region-state document (rampart regionstate build) watched and applied within a second; none: every regional signal unknown")
	purgeFile := fs.String("purge-file", "", "signed cache purge document (rampart purge, or rampart control purge through the control plane) watched and applied within a second (default with -control-url: <state-dir>/purge.json); none: no purges")
	ticketState := fs.String("tls-ticket-state", "", "TLS session ticket key state, made (mode 0600) if missing; the node's proxies that name one file share ticket keys, so a resumed client may land on any (default <state-dir>/tls-tickets.json; \"memory\": this process only)")
	regionStateMaxAge := fs.Duration("region-state-max-age", regionwatch.DefaultMaxAge, "a region-state document older than this (by its creation time) counts as absent (1s..24h)")
	pidFile := fs.String("pid-file", "", "file where the serving process writes its PID once ready (systemd PIDFile= follows it across SIGHUP upgrades)")
	upgradeTimeout := fs.Duration("upgrade-timeout", time.Minute, "on SIGHUP, how long the new process gets to become ready before the old gives up on it and keeps serving (1s..10m)")
	node := addNodeFlags(fs)
	var overrides repeated
	fs.Var(&overrides, "listen-override", "NAME=ADDR: listen on ADDR instead of the snapshot's address for listener NAME, on this node only (repeatable)")
	_ = fs.Parse(args)
	listen, err := daemon.ParseListenOverrides(overrides)
	if err != nil {
		return err
	}
	pub, err := snapshot.ReadPublicKey(*pubPath)
	if err != nil {
		return err
	}
	if *node.url != "" && *denyFile == "" {
		*denyFile = filepath.Join(*state, "deny.json")
	}
	if *node.url != "" && *purgeFile == "" {
		*purgeFile = filepath.Join(*state, "purge.json")
	}
	if *node.url != "" && *regionState == "" && *node.regionStateFile == "" {
		*regionState = filepath.Join(*state, "region-state.json")
	}
	switch *ticketState {
	case "":
		*ticketState = filepath.Join(*state, "tls-tickets.json")
	case "memory":
		*ticketState = ""
	}
	if *node.regionStateFile == "" {
		*node.regionStateFile = *regionState
	}
	nc, withControl, err := node.config(pub, *region, *dir, *denyFile, *purgeFile)
	if err != nil {
		return err
	}
	alog, closeLog, err := openAccessLog(*accessLog)
	if err != nil {
		return err
	}
	defer closeLog()
	log := newLogger()
	upg, err := newUpgrader(*pidFile, *upgradeTimeout, log)
	if err != nil {
		return err
	}
	defer upg.stop()
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The process drains on SIGTERM, and once a new process took over.
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	go func() {
		select {
		case <-upg.exit():
		case <-ctx.Done():
		}
		cancel()
	}()
	var startErr error
	var client nodeClient
	err = daemon.Run(ctx, daemon.Config{ListenOverrides: listen, ControlStatus: client.status,
		Sockets: upg, AdminListen: upg.AdminListen, UpgradeStatus: upg.status,
		SnapshotDir: *dir, StateDir: *state, PublicKey: pub, AdminAddr: *admin, Pprof: *pprofOn,
		AccessLog: alog, Poll: *poll, DrainTimeout: *drain, UnreadyDelay: *unready, Region: *region, DenyFile: *denyFile,
		RegionStateFile: *regionState, RegionStateMaxAge: *regionStateMaxAge, PurgeFile: *purgeFile, HandoffSocket: *handoffSock, Logger: log,
		TicketStateFile: *ticketState,
		Started: func(p *proxy.Proxy, a net.Addr) {
			if startErr = upg.ready(p); startErr != nil {
				log.Error("not ready", "err", startErr)
				cancel()
				return
			}
			slog.Info("rampart proxy started", "admin", a.String(), "active", p.Status().ActiveVersion, "pid", os.Getpid())
			if withControl {
				client.start(ctx, nc, a.String())
			}
			go upg.run(ctx)
		},
	})
	return errors.Join(startErr, err)
}

func newLogger() *slog.Logger {
	l := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	slog.SetDefault(l)
	return l
}

func openAccessLog(where string) (io.Writer, func(), error) {
	switch where {
	case "stdout":
		return os.Stdout, func() {}, nil
	case "stderr":
		return os.Stderr, func() {}, nil
	case "off", "":
		return nil, func() {}, nil
	}
	f, err := os.OpenFile(where, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, nil, fmt.Errorf("open access log: %w", err)
	}
	return f, func() { _ = f.Close() }, nil
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }
