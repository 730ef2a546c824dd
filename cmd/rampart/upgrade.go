package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cloudflare/tableflip"

	"github.com/rampart-edge/rampart/l7/proxy"
)

// upgrader is the proxy's graceful re-exec (SIGHUP): tableflip starts the
// same binary path with the same flags and passes it every listening socket
// (the snapshot's TCP listeners, the UDP sockets of HTTP/3 listeners, the
// admin listener), keyed by listener name and configured address. The new
// process loads the snapshot, serves, and calls Ready; only then does this
// one stop accepting and drain. If the new process exits or is not ready
// within the timeout, this one keeps serving and logs why.
type upgrader struct {
	upg *tableflip.Upgrader
	log *slog.Logger

	hup chan os.Signal // SIGHUP, caught from the start: its default would end the process

	mu      sync.Mutex
	running bool
	last    upgradeStatus
}

// upgradeStatus is /status "upgrade": the last re-exec this process tried.
type upgradeStatus struct {
	HasParent bool      `json:"has_parent"` // this process came from a re-exec
	State     string    `json:"state"`      // idle, running, failed, refused, done
	Error     string    `json:"error,omitempty"`
	At        time.Time `json:"at,omitzero"`
	Attempts  int       `json:"attempts"`
}

func newUpgrader(pidFile string, timeout time.Duration, log *slog.Logger) (*upgrader, error) {
	if timeout < time.Second || timeout > 10*time.Minute {
		return nil, fmt.Errorf("-upgrade-timeout %s: want 1s..10m", timeout)
	}
	lc := &net.ListenConfig{}
	lc.SetMultipathTCP(false)
	upg, err := tableflip.New(tableflip.Options{PIDFile: pidFile, UpgradeTimeout: timeout, ListenConfig: lc})
	if err != nil {
		return nil, fmt.Errorf("graceful upgrade (pid file %q): %w", pidFile, err)
	}
	u := &upgrader{upg: upg, log: log, hup: make(chan os.Signal, 4)}
	signal.Notify(u.hup, syscall.SIGHUP)
	u.last = upgradeStatus{HasParent: upg.HasParent(), State: "idle"}
	return u, nil
}

func socketKey(name, key string) string { return name + "|" + key }

// Listen implements listener.SocketSource: the inherited socket of that
// listener and address, or a new one bound on addr and kept for the next
// process.
func (u *upgrader) Listen(name, key, addr string) (net.Listener, error) {
	return u.upg.ListenWithCallback("tcp", socketKey(name, key), func(string, string) (net.Listener, error) {
		lc := net.ListenConfig{}
		lc.SetMultipathTCP(false)
		return lc.Listen(context.Background(), "tcp", addr)
	})
}

// ListenPacket implements listener.SocketSource for HTTP/3's UDP socket.
func (u *upgrader) ListenPacket(name, key, addr string) (net.PacketConn, error) {
	return u.upg.ListenPacketWithCallback("udp", socketKey(name, key), func(string, string) (net.PacketConn, error) {
		var lc net.ListenConfig
		return lc.ListenPacket(context.Background(), "udp", addr)
	})
}

// AdminListen is the admin listener, inherited like the others so /healthz
// and /status never refuse a connection during an upgrade.
func (u *upgrader) AdminListen(addr string) (net.Listener, error) {
	return u.Listen("admin", addr, addr)
}

func (u *upgrader) status() any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}

func (u *upgrader) set(state string, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last.State, u.last.At, u.last.Error = state, time.Now().UTC(), ""
	if err != nil {
		u.last.Error = err.Error()
	}
}

// ready finishes this process's start: with a parent, only once a snapshot
// is active (else the parent keeps serving and this one exits).
func (u *upgrader) ready(p *proxy.Proxy) error {
	if u.upg.HasParent() && p.Active() == nil {
		return errors.New("upgrade: the new process has no active snapshot (state dir, snapshot dir); the old one keeps serving")
	}
	if err := u.upg.Ready(); err != nil {
		return fmt.Errorf("upgrade: ready: %w", err)
	}
	return nil
}

// run re-execs on every SIGHUP. A SIGHUP while an upgrade runs, while this
// process's own parent still drains, or once ctx ended (this process
// drains) is refused with a log line.
func (u *upgrader) run(ctx context.Context) {
	for range u.hup {
		u.mu.Lock()
		if ctx.Err() != nil {
			u.mu.Unlock()
			u.log.Warn("upgrade refused: this process is draining", "signal", "SIGHUP")
			continue
		}
		if u.running {
			u.mu.Unlock()
			u.log.Warn("upgrade refused: one is already running", "signal", "SIGHUP")
			continue
		}
		u.running = true
		u.last.Attempts++
		u.mu.Unlock()
		u.set("running", nil)
		bin, args := os.Args[0], strings.Join(os.Args[1:], " ")
		u.log.Info("upgrade: starting the new process", "binary", bin, "args", args)
		go func() {
			err := u.upg.Upgrade()
			u.mu.Lock()
			u.running = false
			u.mu.Unlock()
			switch {
			case err == nil:
				u.set("done", nil)
				u.log.Info("upgrade: the new process is ready; this one stops accepting and drains", "binary", bin)
			case strings.Contains(err.Error(), "parent hasn't exited"):
				u.set("refused", err)
				u.log.Warn("upgrade refused: this process's parent is still draining", "binary", bin, "err", err)
			default:
				u.set("failed", err)
				u.log.Error("upgrade failed: this process keeps serving", "binary", bin, "args", args, "err", err)
			}
		}()
	}
}

// exit is closed once a new process took over (or Stop was called).
func (u *upgrader) exit() <-chan struct{} { return u.upg.Exit() }

func (u *upgrader) stop() { u.upg.Stop() }
