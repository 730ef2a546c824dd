package routecheck

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// FixtureVersion is the version a YAML fixture state gets (the source form
// carries none).
var FixtureVersion = envelope.Version{Epoch: 1, Sequence: 1}

// LoadState reads a region state for a check: a signed file (verified with
// pub) or, when the name ends in .yaml or .yml, the unsigned source form of
// regionstate.ParseYAML, taken as created at now.
func LoadState(name string, data []byte, pub ed25519.PublicKey, now time.Time) (*regionstate.State, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		s, err := regionstate.ParseYAML(data, FixtureVersion, now)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return s, nil
	}
	if pub == nil {
		return nil, errors.New(name + ": a signed region state needs the public key (-key)")
	}
	s, err := regionstate.Parse(data, pub)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}
