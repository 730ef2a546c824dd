package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// build, verify, and the refusals an operator meets: a tampered file, the
// wrong key, an invalid source, a zero version.
func TestRegionStateBuildVerify(t *testing.T) {
	dir := t.TempDir()
	if out, code := run(t, "keygen", "-out", filepath.Join(dir, "k")); code != 0 {
		t.Fatalf("keygen: %s", out)
	}
	if out, code := run(t, "keygen", "-out", filepath.Join(dir, "other")); code != 0 {
		t.Fatalf("keygen: %s", out)
	}
	key, pub, file := filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub"), filepath.Join(dir, "rs.json")
	example := "../../format/regionstate/testdata/example.yaml"
	out, code := run(t, "regionstate", "build", "-in", example, "-key", key, "-epoch", "2", "-sequence", "9", "-out", file)
	if code != 0 || !strings.Contains(out, "version 2.9, 3 regions, 1 platforms") {
		t.Fatalf("build: %d %s", code, out)
	}
	out, code = run(t, "regionstate", "verify", "-key", pub, file)
	for _, want := range []string{"ok " + file + ": version 2.9", "region ap-south: unhealthy, draining, serves config 3.38",
		"platform billing: writer eu-west (epoch 12)", "replica us-east: lag 180 ms"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("verify: %d, want %q in:\n%s", code, want, out)
		}
	}
	if out, code := run(t, "regionstate", "verify", "-key", filepath.Join(dir, "other.pub"), file); code != 1 || !strings.Contains(out, "key id") {
		t.Fatalf("verify with another key: %d %s", code, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(tampered, []byte(strings.Replace(string(data), `"lag_ms":180`, `"lag_ms":181`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, "regionstate", "verify", "-key", pub, tampered); code != 1 || !strings.Contains(out, "digest") {
		t.Fatalf("verify a tampered file: %d %s", code, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("regions: [{name: a}, {name: a}]\nplatforms: [{name: p, writer: z}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = run(t, "regionstate", "build", "-in", bad, "-key", key, "-epoch", "2", "-sequence", "10", "-out", filepath.Join(dir, "bad.json"))
	if code != 1 || !strings.Contains(out, "without duplicates") || !strings.Contains(out, `writer "z" is not a listed region`) {
		t.Fatalf("build of an invalid source: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.json")); !os.IsNotExist(err) {
		t.Fatal("a file was written for an invalid source")
	}
	if out, code := run(t, "regionstate", "build", "-in", example, "-key", key, "-out", filepath.Join(dir, "zero.json")); code == 0 || !strings.Contains(out, "usage") {
		t.Fatalf("build without a version: %d %s", code, out)
	}
}
