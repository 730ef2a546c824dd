package snapshot

import (
	"crypto/ed25519"

	"github.com/rampart-edge/rampart/format/envelope"
)

// The signing keys are the envelope's (format/envelope); these names stay
// for the callers that have a snapshot in hand.

// GenerateKey returns a new Ed25519 key pair as PEM; see envelope.GenerateKey.
func GenerateKey() (privPEM, pubPEM []byte, err error) { return envelope.GenerateKey() }

// ParsePrivateKey decodes a PEM PKCS#8 Ed25519 private key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	return envelope.ParsePrivateKey(data)
}

// ParsePublicKey decodes a PEM PKIX Ed25519 public key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) { return envelope.ParsePublicKey(data) }

// ReadPrivateKey loads a PEM private key from a file.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) { return envelope.ReadPrivateKey(path) }

// ReadPublicKey loads a PEM public key from a file.
func ReadPublicKey(path string) (ed25519.PublicKey, error) { return envelope.ReadPublicKey(path) }

// KeyID names a public key: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string { return envelope.KeyID(pub) }
