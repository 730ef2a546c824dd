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
	"time"

	"github.com/rampart-edge/rampart/l7/certgen"
	"github.com/rampart-edge/rampart/l7/daemon"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapdir"
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
	Out       io.Writer // where the "try this" text goes
	AccessLog io.Writer
	Logger    *slog.Logger
}

// Run prepares the directory, starts the demo upstreams and serves until
// ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:9901"
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "snapshots"), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.Dir, err)
	}
	priv, pub, err := ensureKeys(o.Dir)
	if err != nil {
		return err
	}
	certFile, keyFile, err := certgen.Ensure(o.Dir)
	if err != nil {
		return err
	}
	cfg, err := snapshot.ParseYAML(demoConfig)
	if err != nil {
		return fmt.Errorf("embedded config: %w", err)
	}
	for i := range cfg.Listeners {
		if t := cfg.Listeners[i].TLS; t != nil {
			t.Certificates[0].CertFile, t.Certificates[0].KeyFile = certFile, keyFile
		}
	}
	// A fresh sequence each start, so the new snapshot is always newer than
	// the last-known-good from an earlier run.
	cfg.Version.Sequence = uint64(time.Now().Unix())
	file, err := snapshot.Build(cfg, priv, time.Now())
	if err != nil {
		return fmt.Errorf("build demo snapshot: %w", err)
	}
	snapPath := filepath.Join(o.Dir, "snapshots", "demo.snap")
	if err := snapdir.WriteFileAtomic(snapPath, file); err != nil {
		return err
	}

	ups, err := startUpstreams()
	if err != nil {
		return err
	}
	defer ups.close()

	return daemon.Run(ctx, daemon.Config{
		SnapshotDir: filepath.Join(o.Dir, "snapshots"),
		StateDir:    filepath.Join(o.Dir, "state"),
		PublicKey:   pub,
		AdminAddr:   o.AdminAddr,
		AccessLog:   o.AccessLog,
		Logger:      o.Logger,
		Started: func(p *proxy.Proxy, admin net.Addr) {
			if p.Active() == nil {
				fmt.Fprintln(o.Out, "rampart up: the demo snapshot did not activate; see the log above")
				return
			}
			printHelp(o.Out, o.Dir, certFile, admin.String())
		},
	})
}

func printHelp(w io.Writer, dir, cert, admin string) {
	fmt.Fprintf(w, `
rampart is up (state in %s).
  https  https://localhost:8443   (HTTP/2, HTTP/1.1, and HTTP/3 on UDP; self-signed: %s)
  http   http://localhost:8080
  admin  http://%s   (/healthz /readyz /metrics /status)
  demo upstreams: users (stable) on 127.0.0.1:9081, users-canary on 127.0.0.1:9082

Try:
  # route with a path parameter; about 1 in 5 answers come from the canary revision
  curl --cacert %s https://localhost:8443/v1/users/42
  for i in $(seq 20); do curl -s --cacert %s https://localhost:8443/v1/users/$i; done | grep -c canary
  # HTTP/2, and the request id the proxy adds
  curl -si --http2 --cacert %s https://localhost:8443/v1/users | head -5
  # a write with an idempotency key
  curl -s --cacert %s -X POST -H 'Idempotency-Key: k1' -d '{"name":"ada"}' https://localhost:8443/v1/users
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
  curl -s http://%s/status
  curl -s http://%s/metrics | grep rampart_requests_total

Stop with Ctrl-C (the proxy drains in-flight requests first).
`, dir, cert, admin, cert, cert, cert, cert, admin, admin)
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
