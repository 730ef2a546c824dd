// Package revision turns a submitted body into a signed snapshot, with
// the same validation as `rampart snapshot build`, and compares two
// revisions' configs route by route.
package revision

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// MaxBodyBytes bounds a submitted config.
const MaxBodyBytes = snapshot.MaxConfigBytes

// Parse decodes a submitted config strictly. YAML and JSON are accepted
// (JSON is read by the same strict YAML decoder: unknown or duplicate keys
// are errors); a body declared as JSON must be valid JSON. The version in
// the body, if any, is ignored: Compile sets it.
func Parse(body []byte, contentType string) (*snapshot.Config, error) {
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("config is %d bytes, more than the %d allowed", len(body), MaxBodyBytes)
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/json" || strings.HasSuffix(mt, "+json") {
		if !json.Valid(body) {
			var v any
			err := json.Unmarshal(body, &v)
			return nil, fmt.Errorf("parse config: body is not valid JSON: %v", err)
		}
	}
	return snapshot.ParseYAML(body)
}

// Check normalises and validates a config exactly as `rampart snapshot
// build` does, then builds its route table as the proxy will, so a config
// that would fail on a node fails here. Problems come back as one
// *snapshot.ValidationError listing each. The version is set to v first.
func Check(c *snapshot.Config, v snapshot.Version) error {
	c.Version = v
	snapshot.Normalize(c)
	if err := snapshot.Validate(c); err != nil {
		return err
	}
	if _, err := route.NewTable(c.Routes); err != nil {
		return err
	}
	return nil
}

// Build checks c with version v and signs it: the snapshot file.
func Build(c *snapshot.Config, v snapshot.Version, key ed25519.PrivateKey, now time.Time) ([]byte, error) {
	if err := Check(c, v); err != nil {
		return nil, err
	}
	return snapshot.Build(c, key, now)
}

// Problems returns the lines of a validation error, or the error's text.
func Problems(err error) []string {
	var ve *snapshot.ValidationError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	return []string{err.Error()}
}
