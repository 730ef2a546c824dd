package snapshot

import (
	"crypto/ed25519"
	"testing"
	"time"
)

// signRaw signs canonical bytes without validating them, as a buggy or
// hostile signer would.
func signRaw(t *testing.T, priv ed25519.PrivateKey, v Version, canon []byte) []byte {
	t.Helper()
	out, err := seal(priv, v, time.Unix(0, 5), canon)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
