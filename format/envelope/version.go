package envelope

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version orders signed documents: epoch first, then sequence. A document
// is replaced only by one with a higher Version.
type Version struct {
	Epoch    uint64 `json:"epoch"`
	Sequence uint64 `json:"sequence"`
}

// Compare returns -1, 0 or +1 as v is lower than, equal to or higher than w.
func (v Version) Compare(w Version) int {
	switch {
	case v.Epoch < w.Epoch:
		return -1
	case v.Epoch > w.Epoch:
		return 1
	case v.Sequence < w.Sequence:
		return -1
	case v.Sequence > w.Sequence:
		return 1
	}
	return 0
}

// Less reports whether v is lower than w.
func (v Version) Less(w Version) bool { return v.Compare(w) < 0 }

// IsZero reports whether v is the zero Version (no document yet).
func (v Version) IsZero() bool { return v == Version{} }

// String writes v as "epoch.sequence".
func (v Version) String() string {
	return strconv.FormatUint(v.Epoch, 10) + "." + strconv.FormatUint(v.Sequence, 10)
}

// ParseVersion reads "epoch.sequence", as String writes it.
func ParseVersion(s string) (Version, error) {
	e, q, ok := strings.Cut(s, ".")
	if !ok {
		return Version{}, fmt.Errorf("version %q: %w", s, errNoDot)
	}
	ev, err := strconv.ParseUint(e, 10, 64)
	if err != nil {
		return Version{}, fmt.Errorf("version %q: epoch: %w", s, err)
	}
	qv, err := strconv.ParseUint(q, 10, 64)
	if err != nil {
		return Version{}, fmt.Errorf("version %q: sequence: %w", s, err)
	}
	return Version{Epoch: ev, Sequence: qv}, nil
}

var errNoDot = errors.New(`want "epoch.sequence"`)
