package quickstart

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
	"github.com/rampart-edge/rampart/control/server"
)

// controlAddr is where the quickstart's control plane listens.
const controlAddr = "127.0.0.1:9080"

// nodeID is the quickstart node's id at its control plane.
const nodeID = "quickstart"

// control is the quickstart's embedded control plane: one stage ("all"),
// short bakes, an admin token (saved for the user), and the local node
// enrolled at start (a token of its own, rotated on every start).
type control struct {
	srv       *server.Server
	ln        net.Listener
	admin     string
	nodeToken string
}

func tokenPath(dir string) string { return filepath.Join(dir, "admin.token") }

func startControl(ctx context.Context, dir string, log *slog.Logger) (*control, error) {
	admin, adminSHA, err := api.NewToken()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(tokenPath(dir), []byte(admin+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the admin token: %w", err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listen: %s
signing_key: %q
tokens:
  - {name: admin, role: admin, sha256: %s}
storage: {type: embedded, dir: %q}
rollout:
  tick: 200ms
  bake: 2s
  stages: [{name: all}]
`, controlAddr, filepath.Join(dir, "snapshot.key"), adminSHA, filepath.Join(dir, "control"))))
	if err != nil {
		return nil, fmt.Errorf("quickstart control config: %w", err)
	}
	srv, err := server.Open(cfg, server.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("start the control plane: %w", err)
	}
	enrolled, err := srv.Plane.Enroll(ctx, nodeID)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("enrol the quickstart node: %w", err)
	}
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(ctx, "tcp", controlAddr)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("control plane on %s: %w", controlAddr, err)
	}
	go func() { _ = srv.Serve(ln, nil) }()
	return &control{srv: srv, ln: ln, admin: admin, nodeToken: enrolled.Token}, nil
}

// submit sends the demo config as a revision; the idempotency key is its
// digest, so a restart with the same config reuses the revision.
func (c *control) submit(ctx context.Context, yaml string) error {
	sum := sha256.Sum256([]byte(yaml))
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+controlAddr+"/v1/revisions?message=quickstart", bytes.NewReader([]byte(yaml)))
	req.Header.Set("Authorization", "Bearer "+c.admin)
	req.Header.Set("Idempotency-Key", "quickstart-"+hex.EncodeToString(sum[:8]))
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("submit the demo config: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("submit the demo config: %s: %s", resp.Status, body)
	}
	return nil
}

// follow starts the node client for the local proxy.
func (c *control) follow(ctx context.Context, pub ed25519.PublicKey, snapDir, denyFile, purgeFile, admin string, log *slog.Logger) {
	go func() {
		err := nodeclient.Run(ctx, nodeclient.Config{URL: "http://" + controlAddr, Token: c.nodeToken, PublicKey: pub,
			Identity:    model.Identity{NodeID: nodeID, Region: "local", Zone: "local-a"},
			SnapshotDir: snapDir, DenyFile: denyFile, PurgeFile: purgeFile, AdminURL: "http://" + admin,
			ReportInterval: time.Second, WatchTimeout: 10 * time.Second, Logger: log})
		if err != nil && ctx.Err() == nil {
			log.Error("node client stopped", "err", err)
		}
	}()
}

func (c *control) close() {
	c.ln.Close()
	c.srv.Close()
}
