// Package quickstart is `rampart up`: an all-in-one demo on loopback with an
// embedded config, a self-signed certificate made on first start, a key
// pair, and two demo upstreams (a stable and a canary revision).
package quickstart

import (
	"context"
	"crypto/ed25519"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/certgen"
	"github.com/rampart-edge/rampart/l7/daemon"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

//go:embed demo.yaml
var demoConfig []byte

// DemoConfig returns the embedded example config.
func DemoConfig() []byte { return append([]byte(nil), demoConfig...) }

// Options for Run.
type Options struct {
	Dir       string    // state: keys, certificate, snapshots; created if missing
	AdminAddr string    // default 127.0.0.1:9901
	Pprof     bool      // serve /debug/pprof/ on the admin listener
	Out       io.Writer // where the "try this" text goes
	AccessLog io.Writer
	Logger    *slog.Logger
}

// Run prepares the directory, starts an embedded control plane, the demo
// upstreams and a proxy that follows the control plane, submits the demo
// config as a revision, and serves until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:9901"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "snapshots"), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.Dir, err)
	}
	_, pub, err := ensureKeys(o.Dir)
	if err != nil {
		return err
	}
	certFile, keyFile, err := certgen.Ensure(o.Dir)
	if err != nil {
		return err
	}
	cp, err := startControl(ctx, o.Dir, o.Logger)
	if err != nil {
		return err
	}
	defer cp.close()
	rendered := strings.NewReplacer("cert_file: CERT", "cert_file: "+strconv.Quote(certFile),
		"key_file: KEY", "key_file: "+strconv.Quote(keyFile)).Replace(string(demoConfig))
	if err := cp.submit(ctx, rendered); err != nil {
		return err
	}
	ups, err := startUpstreams()
	if err != nil {
		return err
	}
	defer ups.close()

	snapDir, stateDir := filepath.Join(o.Dir, "snapshots"), filepath.Join(o.Dir, "state")
	denyFile, purgeFile := filepath.Join(stateDir, "deny.json"), filepath.Join(stateDir, "purge.json")
	return daemon.Run(ctx, daemon.Config{
		SnapshotDir: snapDir,
		StateDir:    stateDir,
		DenyFile:    denyFile,
		PurgeFile:   purgeFile, // rampart control purge
		PublicKey:   pub,
		AdminAddr:   o.AdminAddr,
		Pprof:       o.Pprof,
		AccessLog:   o.AccessLog,
		Logger:      o.Logger,
		Started: func(p *proxy.Proxy, admin net.Addr) {
			cp.follow(ctx, pub, snapDir, denyFile, purgeFile, admin.String(), o.Logger)
			go func() {
				deadline := time.Now().Add(15 * time.Second)
				for p.Active() == nil || p.Active().Snap.Config.Listeners == nil {
					if time.Now().After(deadline) || ctx.Err() != nil {
						fmt.Fprintln(o.Out, "rampart up: the demo snapshot did not activate; see the log above")
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				printHelp(o.Out, o.Dir, certFile, admin.String())
			}()
		},
	})
}

func printHelp(w io.Writer, dir, cert, admin string) {
	// %[1]s state dir, %[2]s certificate, %[3]s admin address, %[4]s this
	// binary as the user ran it, %[5]s the admin token file.
	fmt.Fprintf(w, `
rampart is up (state in %[1]s).
  https  https://localhost:8443   (HTTP/2, HTTP/1.1, and HTTP/3 on UDP; self-signed: %[2]s)
  http   http://localhost:8080
  admin  http://%[3]s   (/healthz /readyz /metrics /status)
  demo upstreams: users (stable) on 127.0.0.1:9081, users-canary on 127.0.0.1:9082

Try:
  # route with a path parameter; about 1 in 5 answers come from the canary revision
  curl --cacert %[2]s https://localhost:8443/v1/users/42
  for i in $(seq 20); do curl -s --cacert %[2]s https://localhost:8443/v1/users/$i; done | grep -c canary
  # a versioned API: 'Accept-Version: 2' matches route get-user-v2 (always the canary revision)
  curl -s -H 'Accept-Version: 2' --cacert %[2]s https://localhost:8443/v1/users/42
  # HTTP/2, and the request id the proxy adds
  curl -si --http2 --cacert %[2]s https://localhost:8443/v1/users | head -5
  # HTTP/3 over QUIC (UDP 8443). Debian 12's curl has no HTTP/3 ('curl --version' lists HTTP3
  # when it has: then curl --http3-only works too); rampart's own tiny client does:
  %[4]s get -http3 -i -cacert %[2]s https://localhost:8443/v1/users/42
  # a write with an idempotency key
  curl -s --cacert %[2]s -X POST -H 'Idempotency-Key: k1' -d '{"name":"ada"}' https://localhost:8443/v1/users
  # wildcard host and a rest parameter
  curl -s http://files.localhost:8080/files/docs/readme.txt --resolve files.localhost:8080:127.0.0.1
  # an API key (the snapshot holds only its hash); without it: 401
  curl -s -H 'X-Api-Key: demo-key' http://localhost:8080/v1/stats | grep x_request_id
  curl -si http://localhost:8080/v1/stats | head -1
  # a quota of 2/s, burst 5, per client address: the 6th request in a row gets 429
  for i in $(seq 8); do curl -s -o /dev/null -w '%%{http_code} ' http://localhost:8080/v1/users; done; echo
  # errors: 405 with Allow, 404, and 502 from a cluster with no server
  curl -si -X DELETE http://localhost:8080/v1/users/42 | head -3
  curl -si http://localhost:8080/nowhere | head -1
  curl -si http://localhost:8080/v1/orders/7 | head -1
  # snapshot versions and metrics
  curl -s http://%[3]s/status
  curl -s http://%[3]s/metrics | grep rampart_requests_total

The control plane (embedded store) is at http://127.0.0.1:9080; the admin token is in %[5]s.
  # the operator dashboard: open http://127.0.0.1:9080/ui/ and sign in with that token
  export RAMPART_TOKEN=$(cat %[5]s)    # the operator CLI's token (or -token-file FILE)
  %[4]s control fleet                   # this node: versions, health, refusals
  %[4]s control revisions               # the demo config is revision r1
  %[4]s control rollout status r1
  # block your own address through the fast deny channel, wait until the proxy has applied
  # it (it polls every 200 ms), see the 403, then lift it
  %[4]s control deny add cidr 127.0.0.1 -ttl 10m -reason demo
  for i in $(seq 50); do c=$(curl -s -o /dev/null -w '%%{http_code}' http://localhost:8080/v1/users/1); [ "$c" = 403 ] && break; sleep 0.1; done; echo "$c after $i tries"
  %[4]s control deny remove cidr 127.0.0.1/32
  # the same API with curl
  curl -s -H "Authorization: Bearer $RAMPART_TOKEN" http://127.0.0.1:9080/v1/fleet

Stop with Ctrl-C (the proxy drains in-flight requests first).
`, dir, cert, admin, self(), tokenPath(dir))
}

// self is this binary as the user ran it (bin/rampart after make run), so
// the printed commands work as they are.
func self() string {
	if len(os.Args) > 0 && os.Args[0] != "" {
		return os.Args[0]
	}
	return "rampart"
}

func ensureKeys(dir string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	privPath, pubPath := filepath.Join(dir, "snapshot.key"), filepath.Join(dir, "snapshot.pub")
	if _, err := os.Stat(privPath); errors.Is(err, os.ErrNotExist) {
		privPEM, pubPEM, err := snapshot.GenerateKey()
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(privPath, privPEM, 0o600); err != nil {
			return nil, nil, fmt.Errorf("write %s: %w", privPath, err)
		}
		if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
			return nil, nil, fmt.Errorf("write %s: %w", pubPath, err)
		}
	}
	priv, err := snapshot.ReadPrivateKey(privPath)
	if err != nil {
		return nil, nil, err
	}
	pk, err := snapshot.ReadPublicKey(pubPath)
	if err != nil {
		return nil, nil, err
	}
	return priv, pk, nil
}
