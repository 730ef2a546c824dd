package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Format names the snapshot file format: the envelope's format name, part
// of the signed message. v2 is the shared envelope (format/envelope); a v1
// file is refused with ErrFormat naming it.
const Format = "rampart.snapshot.v2"

// MaxFileBytes bounds a snapshot file; larger files are refused.
const MaxFileBytes = 512 << 20

// Block sizes of a snapshot body (content-defined cuts, see
// envelope.ContentCuts): a config edit changes the blocks around it only.
const (
	minBlock = 16 << 10
	avgBlock = 64 << 10
	maxBlock = 256 << 10
)

// Snapshot is a verified snapshot file.
type Snapshot struct {
	Version   Version
	Digest    [32]byte // the envelope's manifest digest: names the canonical bytes as signed
	CreatedAt time.Time
	KeyID     string
	Canonical []byte // the envelope's body, a slice of the file
	Config    *Config

	opened *envelope.Opened // for the next incremental ParseNext
}

// DigestHex is the digest in hex.
func (s *Snapshot) DigestHex() string { return hex.EncodeToString(s.Digest[:]) }

// Errors a snapshot file can fail with; match them with errors.Is. All but
// ErrInvalid are the envelope's.
var (
	ErrTooLarge  = envelope.ErrTooLarge
	ErrMalformed = envelope.ErrMalformed
	ErrFormat    = envelope.ErrFormat
	ErrDigest    = envelope.ErrDigest
	ErrSignature = envelope.ErrSignature
	ErrKeyID     = envelope.ErrKeyID
	ErrInvalid   = errors.New("snapshot config invalid")
)

// Compile normalises and validates a config and returns its canonical bytes:
// the compact JSON encoding of the normalised config.
func Compile(c *Config) ([]byte, error) {
	Normalize(c)
	if err := Validate(c); err != nil {
		return nil, err
	}
	out, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode canonical config: %w", err)
	}
	return out, nil
}

// Build compiles a config and returns a signed snapshot file.
func Build(c *Config, priv ed25519.PrivateKey, created time.Time) ([]byte, error) {
	canon, err := Compile(c)
	if err != nil {
		return nil, err
	}
	return seal(priv, c.Version, created, canon)
}

func seal(priv ed25519.PrivateKey, v Version, created time.Time, canon []byte) ([]byte, error) {
	cuts := envelope.ContentCuts(canon, minBlock, avgBlock, maxBlock)
	out, err := envelope.Seal(priv, Format, envVersion(v), created, canon, cuts)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", v, err)
	}
	if len(out) > MaxFileBytes {
		return nil, fmt.Errorf("snapshot %s: %d bytes is over the %d limit", v, len(out), MaxFileBytes)
	}
	return out, nil
}

func envVersion(v Version) envelope.Version {
	return envelope.Version{Epoch: v.Epoch, Sequence: v.Sequence}
}

// Parse verifies a snapshot file against a public key and decodes it: the
// envelope first (size, framing, format, key id, signature, block digests),
// then the config is decoded strictly, must carry the envelope's version,
// and is validated again.
func Parse(data []byte, pub ed25519.PublicKey) (*Snapshot, error) {
	return ParseNext(nil, data, pub)
}

// ParseNext is Parse with the snapshot in force as prev (or nil): blocks of
// the body equal to prev's are compared instead of hashed again.
func ParseNext(prev *Snapshot, data []byte, pub ed25519.PublicKey) (*Snapshot, error) {
	var po *envelope.Opened
	if prev != nil {
		po = prev.opened
	}
	o, err := envelope.OpenLimit(data, pub, Format, po, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("snapshot file: %w", err)
	}
	var cfg Config
	cd := json.NewDecoder(bytes.NewReader(o.Body()))
	cd.DisallowUnknownFields()
	if err := cd.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w: decode config: %w", o.Version, ErrMalformed, err)
	}
	if cd.More() {
		return nil, fmt.Errorf("snapshot %s: %w: data after the config", o.Version, ErrMalformed)
	}
	if envVersion(cfg.Version) != o.Version {
		return nil, fmt.Errorf("snapshot %s: %w: config version %s differs from the envelope's", o.Version, ErrMalformed, cfg.Version)
	}
	if err := Validate(&cfg); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w: %w", o.Version, ErrInvalid, err)
	}
	return &Snapshot{
		Version:   cfg.Version,
		Digest:    o.Manifest,
		CreatedAt: o.Created,
		KeyID:     o.KeyID,
		Canonical: o.Body(),
		Config:    &cfg,
		opened:    o,
	}, nil
}

// PeekVersion reads the version a snapshot file claims without verifying
// anything; use it only for reporting (the "desired" version).
func PeekVersion(data []byte) (Version, error) {
	h, err := envelope.Peek(data)
	if err != nil {
		return Version{}, fmt.Errorf("snapshot file: %w", err)
	}
	if h.Format != Format {
		return Version{}, fmt.Errorf("snapshot file: %w: the file is format %q, want %q", ErrFormat, h.Format, Format)
	}
	return Version{Epoch: h.Version.Epoch, Sequence: h.Version.Sequence}, nil
}

// FileDigest reads the digest a snapshot file claims (Snapshot.Digest once
// verified) without verifying anything: for a builder's records.
func FileDigest(data []byte) (string, error) {
	h, err := envelope.Peek(data)
	if err != nil {
		return "", fmt.Errorf("snapshot file: %w", err)
	}
	return hex.EncodeToString(h.Manifest[:]), nil
}
