package revision

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

var fixed = time.Unix(1700000000, 0)

func testKeys(tb testing.TB) (ed25519.PrivateKey, ed25519.PublicKey) {
	privPEM, pubPEM, err := snapshot.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	return priv, pub
}
