package snapshot

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"testing"
)

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// signRaw signs canonical bytes without validating them, as a buggy or
// hostile signer would.
func signRaw(t *testing.T, priv ed25519.PrivateKey, v Version, canon []byte) []byte {
	t.Helper()
	digest := sha256.Sum256(canon)
	env := fileEnvelope{Format: Format, Version: v, CreatedAt: 5, SHA256: hex.EncodeToString(digest[:]),
		KeyID:     KeyID(priv.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, signedMessage(v, 5, digest))),
		Config:    canon}
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
