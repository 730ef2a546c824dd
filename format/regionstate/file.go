package regionstate

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Parse verifies a region-state file against pub and decodes it. It checks
// the envelope first (size, framing, format, key id, signature, digest:
// envelope's sentinels), then the body (ErrMalformed, ErrInvalid). It
// accepts only what Build writes: Build(priv, Parse(f)) == f.
func Parse(file []byte, pub ed25519.PublicKey) (*State, error) {
	o, err := envelope.OpenLimit(file, pub, Format, nil, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("region state: %w", err)
	}
	s, err := decodeBody(o.Body(), o.Version, o.Created)
	if err != nil {
		return nil, fmt.Errorf("region state %s: %w", o.Version, err)
	}
	return s, nil
}

// Build signs s as a region-state file. It works on a sorted copy of s (the
// caller's slices are left alone), fills a zero Created with the current
// time, validates, and seals the canonical body with priv.
func Build(priv ed25519.PrivateKey, s *State) ([]byte, error) {
	if s == nil {
		return nil, errors.New("region state: build: no state")
	}
	c := sorted(s)
	if c.Created.IsZero() {
		c.Created = time.Now().UTC()
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("region state %s: build: %w", c.Version, err)
	}
	body := encodeBody(make([]byte, 0, 64+len(c.Regions)*96+len(c.Platforms)*160), c)
	file, err := envelope.Seal(priv, Format, c.Version, c.Created, body, nil)
	if err != nil {
		return nil, fmt.Errorf("region state %s: build: %w", c.Version, err)
	}
	if len(file) > MaxFileBytes {
		return nil, fmt.Errorf("region state %s: build: %d bytes is over the %d limit", c.Version, len(file), MaxFileBytes)
	}
	return file, nil
}
