package snapshot

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Format names the snapshot file format; it is part of the signed message.
const Format = "rampart.snapshot.v1"

// MaxFileBytes bounds a snapshot file; larger files are refused.
const MaxFileBytes = 512 << 20

// Snapshot is a verified snapshot file.
type Snapshot struct {
	Version   Version
	Digest    [32]byte // SHA-256 of Canonical
	CreatedAt time.Time
	KeyID     string
	Canonical []byte
	Config    *Config
}

// DigestHex is the digest in hex.
func (s *Snapshot) DigestHex() string { return hex.EncodeToString(s.Digest[:]) }

type fileEnvelope struct {
	Format    string          `json:"format"`
	Version   Version         `json:"version"`
	CreatedAt int64           `json:"created_at_unix_nano"`
	SHA256    string          `json:"sha256"`
	KeyID     string          `json:"key_id"`
	Signature string          `json:"signature"`
	Config    json.RawMessage `json:"config"`
}

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
	digest := sha256.Sum256(canon)
	pub := priv.Public().(ed25519.PublicKey)
	env := fileEnvelope{
		Format:    Format,
		Version:   c.Version,
		CreatedAt: created.UnixNano(),
		SHA256:    hex.EncodeToString(digest[:]),
		KeyID:     KeyID(pub),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(priv, signedMessage(c.Version, created.UnixNano(), digest))),
		Config:    canon,
	}
	out, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return append(out, '\n'), nil
}

// signedMessage binds the format, version, creation time and digest, so none
// of the envelope's fields can be changed without breaking the signature.
func signedMessage(v Version, created int64, digest [32]byte) []byte {
	m := make([]byte, 0, len(Format)+1+24+32)
	m = append(m, Format...)
	m = append(m, 0)
	m = binary.BigEndian.AppendUint64(m, v.Epoch)
	m = binary.BigEndian.AppendUint64(m, v.Sequence)
	m = binary.BigEndian.AppendUint64(m, uint64(created))
	return append(m, digest[:]...)
}

// Errors a snapshot file can fail with; match them with errors.Is.
var (
	ErrMalformed = errors.New("malformed snapshot file")
	ErrDigest    = errors.New("snapshot digest mismatch")
	ErrSignature = errors.New("snapshot signature invalid")
	ErrKeyID     = errors.New("snapshot key id mismatch")
	ErrInvalid   = errors.New("snapshot config invalid")
)

// Parse verifies a snapshot file against a public key and decodes it. The
// checks run cheapest first: framing, digest, signature, that key_id names
// the verifying key, then the config is decoded strictly and validated
// again.
func Parse(data []byte, pub ed25519.PublicKey) (*Snapshot, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: %d bytes is over the %d limit", ErrMalformed, len(data), MaxFileBytes)
	}
	var env fileEnvelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the snapshot", ErrMalformed)
	}
	if env.Format != Format {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrMalformed, env.Format, Format)
	}
	if len(env.Config) == 0 {
		return nil, fmt.Errorf("%w: no config", ErrMalformed)
	}
	digest := sha256.Sum256(env.Config)
	if hex.EncodeToString(digest[:]) != env.SHA256 {
		return nil, fmt.Errorf("%w: file says %.16s…, content hashes to %x…", ErrDigest, env.SHA256, digest[:8])
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: signature is not %d base64 bytes", ErrSignature, ed25519.SignatureSize)
	}
	if !ed25519.Verify(pub, signedMessage(env.Version, env.CreatedAt, digest), sig) {
		return nil, fmt.Errorf("%w: not signed by key %s (file names key %q)", ErrSignature, KeyID(pub), env.KeyID)
	}
	// key_id is outside the signed message: check it names the verifying
	// key, so that no byte of a file that passes can be changed.
	if id := KeyID(pub); env.KeyID != id {
		return nil, fmt.Errorf("%w: file names key %q but is signed by key %s", ErrKeyID, env.KeyID, id)
	}
	var cfg Config
	cd := json.NewDecoder(bytes.NewReader(env.Config))
	cd.DisallowUnknownFields()
	if err := cd.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%w: decode config: %w", ErrMalformed, err)
	}
	if cfg.Version != env.Version {
		return nil, fmt.Errorf("%w: config version %s differs from envelope version %s", ErrMalformed, cfg.Version, env.Version)
	}
	if err := Validate(&cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &Snapshot{
		Version:   env.Version,
		Digest:    digest,
		CreatedAt: time.Unix(0, env.CreatedAt),
		KeyID:     env.KeyID,
		Canonical: env.Config,
		Config:    &cfg,
	}, nil
}

// PeekVersion reads the version a snapshot file claims without verifying
// anything; use it only for reporting (the "desired" version).
func PeekVersion(data []byte) (Version, error) {
	var env struct {
		Version Version `json:"version"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return Version{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return env.Version, nil
}
