package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFirstboot(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfg, []byte("node: {id: n1, region: r1, zone: z1}\ninterfaces: [eth0]\n"+
		"control: {url: 'https://c.example', token: tok}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmdFirstboot([]string{"-config", cfg, "-out", dir, "-check"}); err != nil {
		t.Fatalf("-check: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "proxy.env")); !os.IsNotExist(err) {
		t.Fatalf("-check wrote proxy.env (stat: %v)", err)
	}
	if err := cmdFirstboot([]string{"-config", cfg, "-out", dir}); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(filepath.Join(dir, "proxy.env"))
	if err != nil {
		t.Fatal(err)
	}
	want := "-control-token-file " + filepath.Join(dir, "node.token") + " -node-id n1 -zone z1"
	if !strings.Contains(string(env), want) {
		t.Fatalf("proxy.env lacks %q:\n%s", want, env)
	}
	if tok, err := os.ReadFile(filepath.Join(dir, "node.token")); err != nil || string(tok) != "tok\n" {
		t.Fatalf("node.token %q, %v", tok, err)
	}

	if err := os.WriteFile(cfg, []byte("node: {id: n1, region: r1}\ninterfaces: [eth0]\nxdp_mode: turbo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "agent.env"))
	err = cmdFirstboot([]string{"-config", cfg, "-out", dir})
	if err == nil || !strings.Contains(err.Error(), `xdp_mode "turbo"`) || !strings.Contains(err.Error(), cfg) {
		t.Fatalf("bad file: want an error naming %s and xdp_mode, got %v", cfg, err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "agent.env")); string(after) != string(before) {
		t.Fatalf("a bad file changed agent.env:\n%s", after)
	}
	if err := cmdFirstboot([]string{"-config", filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Fatal("a missing node.yaml was accepted")
	}
}
