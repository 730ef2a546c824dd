package agent

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// TestAdminUpBeforeSync: the admin listener answers before the BPF filter
// is even open — /healthz 200, /metrics 200, /readyz 503 saying why — and
// /readyz stays 503 until a snapshot is in the maps.
func TestAdminUpBeforeSync(t *testing.T) {
	needRoot(t)
	pub, _, _ := ed25519.GenerateKey(nil)
	dir := t.TempDir()
	cfg := Config{
		Interfaces: []string{fmt.Sprintf("rtnone%d", netnstest.Next())}, // missing: retried, not fatal
		PinRoot:    netnstest.PinRoot(t), Netns: netnstest.New(t, "ra").Path,
		SnapshotDir: filepath.Join(dir, "snaps"), StateDir: filepath.Join(dir, "state"), PublicKey: pub,
		HandoffSocket: filepath.Join(dir, "none.sock"), AdminAddr: "127.0.0.1:0",
		VIPInterface: fmt.Sprintf("rtv%d", netnstest.Next()),
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	type answer struct {
		code int
		body string
	}
	get := func(addr, path string) answer {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return answer{0, err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(b)}
	}
	early := map[string]answer{}
	addrc := make(chan string, 1)
	// Started runs on Run's goroutine before the filter is opened: what it
	// sees is what a client sees while the agent starts.
	cfg.Started = func(x net.Addr) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			early[p] = get(x.String(), p)
		}
		addrc <- x.String()
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("admin listener not up within 30 s")
	}
	if h := early["/healthz"]; h.code != 200 {
		t.Errorf("/healthz before the filter opened: %d %q", h.code, h.body)
	}
	if r := early["/readyz"]; r.code != 503 || !strings.Contains(r.body, "BPF filter not open") {
		t.Errorf("/readyz before the filter opened: %d %q", r.code, r.body)
	}
	if m := early["/metrics"]; m.code != 200 || !strings.Contains(m.body, "rampart_agent_ready 0") {
		t.Errorf("/metrics before the filter opened: %d, ready gauge not 0", m.code)
	}
	// Filter open, no snapshot: still unready, and saying so.
	var r answer
	waitFor(t, 30*time.Second, "/readyz naming the missing snapshot", func() bool {
		r = get(addr, "/readyz")
		return strings.Contains(r.body, "no active snapshot")
	})
	if r.code != 503 {
		t.Errorf("/readyz without a snapshot: %d %q", r.code, r.body)
	}
	if m := get(addr, "/metrics"); m.code != 200 || !strings.Contains(m.body, "rampart_agent_programs_loaded 3") {
		t.Errorf("/metrics after the filter opened: %d, programs_loaded not 3", m.code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := Teardown(cfg); err != nil {
		t.Errorf("Teardown: %v", err)
	}
}
