package main

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/format/envelope"
)

// The deny list through the binary: build, verify, and the refusals an
// operator meets (the wrong key, a tampered file, invalid entries, a
// missing flag), as TestRegionStateBuildVerify does for region state.
func TestDenyBuildVerify(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"k", "other"} {
		if out, code := run(t, "keygen", "-out", filepath.Join(dir, k)); code != 0 {
			t.Fatalf("keygen: %s", out)
		}
	}
	key, pub, file := filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub"), filepath.Join(dir, "deny.json")
	src := filepath.Join(dir, "entries.yaml")
	if err := os.WriteFile(src, []byte(`- {kind: cidr, value: 198.51.100.0/24, ttl: 1h, reason: scanner}
- {kind: jti, value: token-7, expires_at: "2099-01-01T00:00:00Z", reason: leaked}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, "deny", "build", "-in", src, "-key", key, "-sequence", "3", "-out", file)
	if code != 0 || !strings.Contains(out, "wrote "+file+": sequence 3") || !strings.Contains(out, "2 entries (jti 1, cidr 1)") {
		t.Fatalf("build: %d %s", code, out)
	}
	out, code = run(t, "deny", "verify", "-pub", pub, file)
	if code != 0 || !strings.Contains(out, "ok "+file+": sequence 3") || !strings.Contains(out, "1 CIDRs in force now") {
		t.Fatalf("verify: %d %s", code, out)
	}
	if out, code := run(t, "deny", "verify", "-pub", filepath.Join(dir, "other.pub"), file); code != 1 || !strings.Contains(out, file+":") {
		t.Fatalf("verify with another key: %d %s", code, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tampered := filepath.Join(dir, "tampered.json")
	if err := os.WriteFile(tampered, []byte(strings.Replace(string(data), "token-7", "token-8", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, "deny", "verify", "-pub", pub, tampered); code != 1 || !strings.Contains(out, tampered+":") {
		t.Fatalf("verify a tampered file: %d %s", code, out)
	}
	if out, code := run(t, "deny", "verify", "-pub", pub, filepath.Join(dir, "missing.json")); code != 1 || !strings.Contains(out, "read deny file") {
		t.Fatalf("verify a missing file: %d %s", code, out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("- {kind: colour, value: red, ttl: 1h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, "deny", "build", "-in", bad, "-key", key, "-sequence", "4", "-out", filepath.Join(dir, "bad.json")); code != 1 || !strings.Contains(out, bad+":") {
		t.Fatalf("build of invalid entries: %d %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.json")); !os.IsNotExist(err) {
		t.Fatal("a file was written for invalid entries")
	}
	if out, code := run(t, "deny", "build", "-in", src, "-key", key, "-out", filepath.Join(dir, "x.json")); code == 0 || !strings.Contains(out, "usage") {
		t.Fatalf("build without a sequence: %d %s", code, out)
	}
	if out, code := run(t, "deny", "sign"); code == 0 || !strings.Contains(out, `unknown deny command "sign" (want build or verify)`) {
		t.Fatalf("an unknown subcommand: %d %s", code, out)
	}
}

func TestBuildOrVerify(t *testing.T) {
	var ran []string
	build := func(a []string) error { ran = append(ran, "build "+strings.Join(a, " ")); return nil }
	verify := func(a []string) error { ran = append(ran, "verify "+strings.Join(a, " ")); return nil }
	if err := buildOrVerify("x", []string{"build", "-a"}, build, verify); err != nil {
		t.Fatal(err)
	}
	if err := buildOrVerify("x", []string{"verify", "f"}, build, verify); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ran, ","); got != "build -a,verify f" {
		t.Fatalf("ran %q", got)
	}
	if err := buildOrVerify("x", nil, build, verify); err == nil || err.Error() != "want 'x build' or 'x verify'" {
		t.Fatalf("no subcommand: %v", err)
	}
	if err := buildOrVerify("x", []string{"Build"}, build, verify); err == nil || !strings.Contains(err.Error(), `unknown x command "Build"`) {
		t.Fatalf("unknown subcommand: %v", err)
	}
}

// seal writes only what parses back with the key's public half; every
// failure names what failed.
func TestSealAndOpenSigned(t *testing.T) {
	dir := t.TempDir()
	keyPEM, pubPEM, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := envelope.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	key, pubPath := filepath.Join(dir, "k.key"), filepath.Join(dir, "k.pub")
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// A toy format: the bytes are the message followed by its signature.
	build := func(p ed25519.PrivateKey) ([]byte, error) {
		return append([]byte("doc"), ed25519.Sign(p, []byte("doc"))...), nil
	}
	parse := func(b []byte, k ed25519.PublicKey) (string, error) {
		if len(b) < 3 || !ed25519.Verify(k, b[:3], b[3:]) {
			return "", errors.New("bad signature")
		}
		return string(b[:3]), nil
	}
	out := filepath.Join(dir, "doc")
	doc, file, err := seal("toy.yaml", key, out, build, parse)
	if err != nil || doc != "doc" || len(file) != 3+ed25519.SignatureSize {
		t.Fatalf("seal: %q, %d bytes, %v", doc, len(file), err)
	}
	got, gotPub, err := openSigned(pubPath, out, "toy file", parse)
	if err != nil || got != "doc" || !gotPub.Equal(pub) {
		t.Fatalf("openSigned: %q %v", got, err)
	}

	// Failures: nothing written, the error says what.
	broken := filepath.Join(dir, "broken")
	if _, _, err := seal("toy.yaml", key, broken, func(ed25519.PrivateKey) ([]byte, error) { return []byte("doc!"), nil }, parse); err == nil ||
		!strings.Contains(err.Error(), "verify what was built: bad signature") {
		t.Fatalf("seal of bytes that do not parse back: %v", err)
	}
	if _, _, err := seal("toy.yaml", key, broken, func(ed25519.PrivateKey) ([]byte, error) { return nil, errors.New("no entries") }, parse); err == nil || err.Error() != "toy.yaml: no entries" {
		t.Fatalf("seal with a failing build: %v", err)
	}
	if _, _, err := seal("toy.yaml", filepath.Join(dir, "none.key"), broken, build, parse); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("seal without a key: %v", err)
	}
	if _, _, err := seal("toy.yaml", pubPath, broken, build, parse); err == nil {
		t.Fatal("seal with a public key as the private one: no error")
	}
	if _, err := os.Stat(broken); !os.IsNotExist(err) {
		t.Fatalf("a failed seal wrote %s", broken)
	}
	if _, _, err := openSigned(pubPath, filepath.Join(dir, "missing"), "toy file", parse); err == nil || !strings.Contains(err.Error(), "read toy file") {
		t.Fatalf("openSigned of a missing file: %v", err)
	}
	if _, _, err := openSigned(key, out, "toy file", parse); err == nil || !strings.Contains(err.Error(), "public key") {
		t.Fatalf("openSigned with a private key as the public one: %v", err)
	}
	if err := os.WriteFile(broken, []byte("docXX"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openSigned(pubPath, broken, "toy file", parse); err == nil || err.Error() != broken+": bad signature" {
		t.Fatalf("openSigned of a bad file: %v", err)
	}
	if got, _, path, err := verifySigned("toy", "pub", "toy file", []string{"-pub", pubPath, out}, parse); err != nil || got != "doc" || path != out {
		t.Fatalf("verifySigned: %q %q %v", got, path, err)
	}
	if _, _, _, err := verifySigned("toy", "pub", "toy file", []string{"-pub", pubPath}, parse); err == nil || err.Error() != "usage: rampart toy verify -pub KEY.pub FILE" {
		t.Fatalf("verifySigned without a file: %v", err)
	}
}

func TestReadSource(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.yaml")
	if err := os.WriteFile(src, []byte("42"), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(b []byte) (int, error) {
		if string(b) != "42" {
			return 0, errors.New("not the answer")
		}
		return 42, nil
	}
	if v, err := readSource(src, "toy source", parse); err != nil || v != 42 {
		t.Fatalf("readSource: %d %v", v, err)
	}
	if _, err := readSource(filepath.Join(dir, "missing.yaml"), "toy source", parse); err == nil || !strings.HasPrefix(err.Error(), "read toy source: ") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("readSource of a missing file: %v", err)
	}
	if err := os.WriteFile(src, []byte("41"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readSource(src, "toy source", parse); err == nil || err.Error() != src+": not the answer" {
		t.Fatalf("readSource of a bad source: %v", err)
	}
}
