package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// A region-state file next to a running proxy shows in /status and
// /metrics once applied, and is persisted in the state dir.
func TestRegionStateInStatusAndMetrics(t *testing.T) {
	privPEM, pubPEM, _ := snapshot.GenerateKey()
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	admin, state := freeAddr(t), t.TempDir()
	rsPath := filepath.Join(t.TempDir(), "region-state.json")
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{StateDir: state, PublicKey: pub, AdminAddr: admin, RegionStateFile: rsPath,
			RegionStateMaxAge: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Started: func(*proxy.Proxy, net.Addr) { close(started) }})
	}()
	<-started
	defer func() { cancel(); <-done }()

	st := getStatus(t, admin)
	if st.RegionState == nil || st.RegionState.Version != "" || st.RegionState.Fresh {
		t.Fatalf("before any document: region_state = %+v", st.RegionState)
	}
	file, err := regionstate.Build(priv, &regionstate.State{Version: envelope.Version{Epoch: 4, Sequence: 2}, Created: time.Now(),
		Regions: []regionstate.Region{{Name: "eu-west", Healthy: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := envelope.WriteFileAtomic(rsPath, file, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for st = getStatus(t, admin); st.RegionState.Version != "4.2"; st = getStatus(t, admin) {
		if time.Now().After(deadline) {
			t.Fatalf("not applied within 30 s: %+v", st.RegionState)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !st.RegionState.Fresh || st.RegionState.Regions != 1 || st.RegionState.MaxAgeSeconds != 60 {
		t.Fatalf("region_state = %+v", st.RegionState)
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`rampart_region_state_version{part="epoch"} 4`, `rampart_region_state_version{part="sequence"} 2`,
		"rampart_region_state_stale 0", `rampart_region_state_rejected_total{reason="signature"} 0`, "rampart_region_state_age_seconds "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// It is persisted right after it is applied.
	for {
		kept, err := os.ReadFile(filepath.Join(state, "region-state.json"))
		if err == nil && string(kept) == string(file) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the document is not kept in the state dir: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getStatus(t *testing.T, admin string) Status {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
