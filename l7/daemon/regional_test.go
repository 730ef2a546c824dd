package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// The region-state watcher feeds the proxy's regional decision: a platform
// route fails closed until a document arrives, then is served in the
// tenant's region.
func TestRegionStateFeedsTheRegionalDecision(t *testing.T) {
	privPEM, pubPEM, _ := snapshot.GenerateKey()
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "eu-west") }))
	defer up.Close()
	sum := sha256.Sum256([]byte("key-acme"))
	cfg := &snapshot.Config{
		Version:   snapshot.Version{Epoch: 1, Sequence: 1},
		Listeners: []snapshot.Listener{{Name: "http", Address: "127.0.0.1:0"}},
		Regions:   []snapshot.RegionDef{{Name: "eu-west"}},
		Platforms: []snapshot.Platform{{Name: "db", Clusters: []string{"app"}, ReplicaRegions: []string{"eu-west"}}},
		Tenants:   []snapshot.Tenant{{ID: "acme", PrimaryRegion: "eu-west"}},
		AuthPolicies: []snapshot.AuthPolicy{{ID: "keys", Type: "api_key", APIKey: &snapshot.APIKeyPolicy{
			Keys: []snapshot.APIKey{{ID: "k", SHA256: hex.EncodeToString(sum[:]), Tenant: "acme"}}}}},
		Clusters: []snapshot.Cluster{{Name: "app", Endpoints: []snapshot.Endpoint{{Address: up.Listener.Addr().String(), Region: "eu-west"}}}},
		Routes: []snapshot.Route{{ID: "r", Host: "*", Methods: []string{"GET"}, PathTemplate: "/x", UpstreamCluster: "app",
			TimeoutMs: 2000, AuthPolicyID: "keys", Platform: "db"}},
	}
	file, err := snapshot.Build(cfg, priv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Parse(file, pub)
	if err != nil {
		t.Fatal(err)
	}
	rsPath := filepath.Join(t.TempDir(), "region-state.json")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *proxy.Proxy, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{StateDir: t.TempDir(), PublicKey: pub, AdminAddr: freeAddr(t), RegionStateFile: rsPath,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Region: "eu-west",
			Started: func(p *proxy.Proxy, _ net.Addr) { started <- p }})
	}()
	p := <-started
	defer func() { cancel(); <-done }()
	if err := p.Apply(snap); err != nil {
		t.Fatal(err)
	}
	addr, _ := p.ListenerAddr("http")
	try := func() (int, string) {
		req, _ := http.NewRequest("GET", "http://"+addr.String()+"/x", nil)
		req.Header.Set("X-Api-Key", "key-acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := try(); code != http.StatusServiceUnavailable {
		t.Fatalf("before any region state: %d %q, want 503", code, body)
	}
	now := time.Now()
	rs, err := regionstate.Build(priv, &regionstate.State{Version: envelope.Version{Epoch: 1, Sequence: 1}, Created: now,
		Regions:   []regionstate.Region{{Name: "eu-west", Healthy: true, ConfigVersion: envelope.Version{Epoch: 1, Sequence: 1}}},
		Platforms: []regionstate.Platform{{Name: "db", Writer: "eu-west", Replicas: []regionstate.Replica{{Region: "eu-west", LagMs: 1, ObservedAt: now}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(rsPath, rs, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := try()
		if code == 200 && body == "eu-west" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the region state was written: %d %q, want 200 from eu-west", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
