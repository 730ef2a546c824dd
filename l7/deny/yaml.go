package deny

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxYAMLBytes bounds an entries file for ParseYAML.
const MaxYAMLBytes = 256 << 20

type yamlEntry struct {
	Kind      string `yaml:"kind"`
	Value     string `yaml:"value"`
	ExpiresAt string `yaml:"expires_at"`
	TTL       string `yaml:"ttl"`
	Reason    string `yaml:"reason"`
}

// ParseYAML reads the source of a deny list: a YAML sequence of entries,
// each with kind, value, reason (optional) and either expires_at (RFC 3339)
// or ttl (a Go duration such as "1h", counted from now). Decoding is
// strict: unknown keys and a second document are errors. `[]` is an empty
// list. Every entry is checked as Build would (kind, value, reason), and
// all problems are reported together, naming each entry.
func ParseYAML(data []byte, now time.Time) ([]Entry, error) {
	if len(data) > MaxYAMLBytes {
		return nil, fmt.Errorf("entries file is %d bytes, more than the %d allowed", len(data), MaxYAMLBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var src []yamlEntry
	if err := dec.Decode(&src); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("entries file is empty (write [] for an empty list)")
		}
		return nil, fmt.Errorf("parse entries: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse entries: more than one YAML document")
	}
	out := make([]Entry, 0, len(src))
	var problems []string
	for i, y := range src {
		e := Entry{Kind: Kind(y.Kind), Value: y.Value, Reason: y.Reason}
		var err error
		switch {
		case y.ExpiresAt != "" && y.TTL != "":
			err = errors.New("both expires_at and ttl")
		case y.ExpiresAt != "":
			if e.ExpiresAt, err = time.Parse(time.RFC3339, y.ExpiresAt); err != nil {
				err = fmt.Errorf("expires_at: %w", err)
			}
		case y.TTL != "":
			var d time.Duration
			if d, err = time.ParseDuration(y.TTL); err != nil {
				err = fmt.Errorf("ttl: %w", err)
			} else if d <= 0 {
				err = fmt.Errorf("ttl %s is not positive", y.TTL)
			}
			e.ExpiresAt = now.Add(d)
		default:
			err = errors.New("no expires_at or ttl (every entry expires)")
		}
		check := e
		if err != nil { // still check the rest of the entry
			check.ExpiresAt = now.Add(time.Hour)
		}
		if _, nerr := normalize(check); nerr != nil {
			err = errors.Join(err, nerr)
		}
		if err != nil {
			msg := strings.ReplaceAll(err.Error(), "\n", "; ")
			problems = append(problems, fmt.Sprintf("entry %d (%s %.64q): %s", i+1, y.Kind, y.Value, msg))
			continue
		}
		out = append(out, e)
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("and %d more", len(problems)-20))
		}
		return nil, fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(problems, "\n  "))
	}
	return out, nil
}
