package daemon

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// /status shows each listener's bound address (port 0 resolved), a
// node-local override next to the snapshot's address (and traffic on
// the override), the last refused snapshot with its reason, and the
// control plane's state.
func TestStatusListenersOverrideRefusalControl(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	dir := t.TempDir()
	privPEM, pubPEM, _ := snapshot.GenerateKey()
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	mine, admin := freeAddr(t), freeAddr(t)
	write := func(seq uint64, tls *snapshot.TLS) {
		cfg := &snapshot.Config{Version: snapshot.Version{Epoch: 1, Sequence: seq},
			Listeners: []snapshot.Listener{{Name: "web", Address: "127.0.0.1:8080"}, {Name: "other", Address: "127.0.0.1:0", TLS: tls}},
			Clusters:  []snapshot.Cluster{{Name: "c", Endpoints: []snapshot.Endpoint{{Address: strings.TrimPrefix(up.URL, "http://")}}}},
			Routes:    []snapshot.Route{{ID: "r", Host: "*", Methods: []string{"GET"}, PathTemplate: "/x", UpstreamCluster: "c", TimeoutMs: 1000}},
			Limits:    snapshot.Limits{DrainTimeoutMs: 1000}}
		file, err := snapshot.Build(cfg, priv, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "1-"+string(rune('0'+seq))+".snap"), file, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *proxy.Proxy, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{SnapshotDir: dir, StateDir: t.TempDir(), PublicKey: pub, AdminAddr: admin, Poll: 20 * time.Millisecond,
			ListenOverrides: map[string]string{"web": mine}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			ControlStatus: func() any { return map[string]any{"url": "http://control.invalid", "reachable": false} },
			Started:       func(p *proxy.Proxy, _ net.Addr) { started <- p }})
	}()
	<-started
	defer func() { cancel(); <-done }()
	if c := code("http://" + mine + "/x"); c != 200 {
		t.Fatalf("GET /x on the overriding address: %d", c)
	}
	status := func() Status {
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
	st := status()
	if st.ActiveVersion != "1.1" || len(st.Listeners) != 2 || st.LastRefusal != nil {
		t.Fatalf("status %+v", st)
	}
	by := map[string]ListenerStatus{}
	for _, l := range st.Listeners {
		by[l.Name] = l
	}
	web, other := by["web"], by["other"]
	if web.Name != "web" || web.Address != mine || web.SnapshotAddress != "127.0.0.1:8080" || web.Bound != mine {
		t.Errorf("overridden listener %+v", web)
	}
	if other.Address != "127.0.0.1:0" || other.SnapshotAddress != "" || other.Bound == "" || strings.HasSuffix(other.Bound, ":0") {
		t.Errorf("port-0 listener %+v", other)
	}
	if c, _ := st.Control.(map[string]any); c["url"] != "http://control.invalid" {
		t.Errorf("control %+v", st.Control)
	}
	write(2, &snapshot.TLS{Certificates: []snapshot.Certificate{{CertFile: filepath.Join(dir, "missing.pem"), KeyFile: filepath.Join(dir, "missing.key")}}})
	deadline := time.Now().Add(30 * time.Second)
	for st = status(); st.LastRefusal == nil && time.Now().Before(deadline); st = status() {
		time.Sleep(20 * time.Millisecond)
	}
	if r := st.LastRefusal; r == nil || r.Version != "1.2" || r.Reason != "build" || !strings.Contains(r.Error, "missing.pem") || st.ActiveVersion != "1.1" {
		t.Fatalf("after a snapshot with a missing certificate: %+v refusal %+v", st, st.LastRefusal)
	}
}

func TestParseListenOverrides(t *testing.T) {
	got, err := ParseListenOverrides([]string{"web=127.0.0.1:18080", "admin=[::1]:0"})
	if err != nil || got["web"] != "127.0.0.1:18080" || got["admin"] != "[::1]:0" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range [][]string{{"web"}, {"=1.2.3.4:5"}, {"web="}, {"a=x:1", "a=y:2"}} {
		if _, err := ParseListenOverrides(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
