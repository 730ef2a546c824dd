package envelope

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestKeys(t *testing.T) {
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ParsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("the public key is not the private key's")
	}
	if id := KeyID(pub); !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(id) {
		t.Fatalf("KeyID = %q, want 16 lower-case hex digits", id)
	}
	if KeyID(pub) == KeyID(ed25519.PublicKey(make([]byte, 32))) {
		t.Fatal("two keys share a key id")
	}
	if _, err := ParsePrivateKey(pubPEM); err == nil {
		t.Error("a public key parsed as a private key")
	}
	if _, err := ParsePublicKey(privPEM); err == nil {
		t.Error("a private key parsed as a public key")
	}
	if _, err := ParsePublicKey([]byte("not pem")); err == nil {
		t.Error("garbage parsed as a public key")
	}
	dir := t.TempDir()
	pp, qp := filepath.Join(dir, "k"), filepath.Join(dir, "k.pub")
	if err := os.WriteFile(pp, privPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(qp, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if k, err := ReadPrivateKey(pp); err != nil || !k.Equal(priv) {
		t.Errorf("ReadPrivateKey: %v", err)
	}
	if k, err := ReadPublicKey(qp); err != nil || !k.Equal(pub) {
		t.Errorf("ReadPublicKey: %v", err)
	}
	if _, err := ReadPublicKey(pp); err == nil {
		t.Error("ReadPublicKey read a private key file")
	}
	if _, err := ReadPrivateKey(filepath.Join(dir, "none")); err == nil {
		t.Error("ReadPrivateKey read a missing file")
	}
}
