package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/server"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Run, as `rampart control -config FILE` calls it: a key file, a config
// file, the embedded store; serves until its context ends.
func TestRunFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	privPEM, _, err := snapshot.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "snapshot.key")
	_ = os.WriteFile(keyFile, privPEM, 0o600)
	tok, sum, err := api.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	cfgFile := filepath.Join(dir, "control.yaml")
	_ = os.WriteFile(cfgFile, []byte(fmt.Sprintf("listen: %s\nsigning_key: %s\nstorage: {dir: %s}\ntokens: [{name: ops, role: admin, sha256: %s}]\n",
		addr, keyFile, filepath.Join(dir, "data"), sum)), 0o600)
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, logger()) }()
	in := &instance{url: "http://" + addr}
	eventually(t, 30*time.Second, "the server to listen", func() bool {
		resp, err := http.Get(in.url + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	var rev struct{ ID string }
	if r := in.call(t, tok, "POST", "/v1/revisions", "application/yaml", []byte(cfgYAML(1, 100)), nil, &rev); r.StatusCode != 201 || rev.ID == "" {
		t.Fatalf("submit: %d %s", r.StatusCode, bodyOf(r))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
