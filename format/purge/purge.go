// Package purge is the cache purge document: a signed, versioned list of
// purge rules that every proxy applies to its response cache (l7/cache).
// A rule removes the objects stored before its time that match all of its
// selectors: a route id, a key prefix (host+path?query as routed), a
// surrogate key (one of the Surrogate-Key response header's words).
//
// The document uses the shared envelope (format/envelope): the same
// Ed25519 key and (epoch, sequence) rules as the snapshot, the deny list
// and the region state. Its body is canonical JSON:
//
//	{"rules":[{"id":1,"at_unix_nano":T,"route":"r","prefix":"p","surrogate_key":"k"},...]}
//
// with rules in increasing id and the empty selectors left out. Parse
// refuses anything Build would not write. This is a format package: no
// goroutines or metrics; the proxy's watcher is l7/purgewatch.
package purge

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Format names the document in its envelope.
const Format = "rampart.purge.v1"

// Bounds.
const (
	MaxRules         = 4096
	MaxSelectorBytes = 1024
	MaxFileBytes     = 8 << 20
)

// ErrInvalid marks a body that decodes but breaks a rule of the format.
var ErrInvalid = errors.New("invalid purge document")

// Rule removes the objects stored before At matching every set selector.
type Rule struct {
	ID           uint64 `json:"id"`
	AtUnixNano   int64  `json:"at_unix_nano"`
	Route        string `json:"route,omitempty"`
	Prefix       string `json:"prefix,omitempty"`
	SurrogateKey string `json:"surrogate_key,omitempty"`
}

// At is the rule's time.
func (r Rule) At() time.Time { return time.Unix(0, r.AtUnixNano) }

// Document is a purge document.
type Document struct {
	Version envelope.Version `json:"-"`
	Created time.Time        `json:"-"`
	Rules   []Rule           `json:"rules"`
}

// Validate checks the rules: ids increasing from 1 up, a time, at least
// one selector, bounded sizes.
func (d *Document) Validate() error {
	if len(d.Rules) > MaxRules {
		return fmt.Errorf("%w: %d rules, more than %d", ErrInvalid, len(d.Rules), MaxRules)
	}
	var last uint64
	for i, r := range d.Rules {
		switch {
		case r.ID == 0:
			return fmt.Errorf("%w: rule #%d: id 0", ErrInvalid, i+1)
		case r.ID <= last:
			return fmt.Errorf("%w: rule %d: ids must increase (after %d)", ErrInvalid, r.ID, last)
		case r.AtUnixNano <= 0:
			return fmt.Errorf("%w: rule %d: at_unix_nano %d is not a time", ErrInvalid, r.ID, r.AtUnixNano)
		case r.Route == "" && r.Prefix == "" && r.SurrogateKey == "":
			return fmt.Errorf("%w: rule %d: no selector (route, prefix or surrogate_key)", ErrInvalid, r.ID)
		case len(r.Route) > MaxSelectorBytes || len(r.Prefix) > MaxSelectorBytes || len(r.SurrogateKey) > MaxSelectorBytes:
			return fmt.Errorf("%w: rule %d: a selector is longer than %d bytes", ErrInvalid, r.ID, MaxSelectorBytes)
		}
		last = r.ID
	}
	return nil
}

// encodeBody is the canonical body.
func encodeBody(d *Document) ([]byte, error) {
	rules := d.Rules
	if rules == nil {
		rules = []Rule{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Rules []Rule `json:"rules"`
	}{rules}); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// DecodeBody decodes and validates a body; it refuses unknown fields,
// trailing bytes and any spelling but the canonical one.
func DecodeBody(body []byte) (*Document, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var d Document
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: bytes after the body", ErrInvalid)
	}
	if d.Rules == nil {
		return nil, fmt.Errorf("%w: rules are missing", ErrInvalid)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	canon, err := encodeBody(&d)
	if err != nil || !bytes.Equal(canon, body) {
		return nil, fmt.Errorf("%w: body is not canonical", ErrInvalid)
	}
	return &d, nil
}

// Parse verifies a purge file against pub and decodes it.
func Parse(file []byte, pub ed25519.PublicKey) (*Document, error) {
	o, err := envelope.OpenLimit(file, pub, Format, nil, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("purge document: %w", err)
	}
	d, err := DecodeBody(o.Body())
	if err != nil {
		return nil, fmt.Errorf("purge document %s: %w", o.Version, err)
	}
	d.Version, d.Created = o.Version, o.Created
	return d, nil
}

// Build validates d and signs it (a zero Created takes the current time).
func Build(priv ed25519.PrivateKey, d *Document) ([]byte, error) {
	if d == nil {
		return nil, errors.New("purge document: build: no document")
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("purge document %s: build: %w", d.Version, err)
	}
	created := d.Created
	if created.IsZero() {
		created = time.Now().UTC()
	}
	body, err := encodeBody(d)
	if err != nil {
		return nil, fmt.Errorf("purge document %s: build: %w", d.Version, err)
	}
	file, err := envelope.Seal(priv, Format, d.Version, created, body, nil)
	if err != nil {
		return nil, fmt.Errorf("purge document %s: build: %w", d.Version, err)
	}
	if len(file) > MaxFileBytes {
		return nil, fmt.Errorf("purge document %s: build: %d bytes is over the %d limit", d.Version, len(file), MaxFileBytes)
	}
	return file, nil
}

// Append is d with one more rule (the next id, at the given time), at the
// next sequence of d's epoch; d is left alone. A nil d starts at 1.1.
func Append(d *Document, at time.Time, route, prefix, surrogate string) *Document {
	n := &Document{Version: envelope.Version{Epoch: 1, Sequence: 1}}
	var next uint64 = 1
	if d != nil {
		n.Version = envelope.Version{Epoch: max(d.Version.Epoch, 1), Sequence: d.Version.Sequence + 1}
		n.Rules = append(n.Rules, d.Rules...)
		if len(d.Rules) > 0 {
			next = d.Rules[len(d.Rules)-1].ID + 1
		}
	}
	n.Rules = append(n.Rules, Rule{ID: next, AtUnixNano: at.UnixNano(), Route: route, Prefix: prefix, SurrogateKey: surrogate})
	if len(n.Rules) > MaxRules {
		n.Rules = n.Rules[len(n.Rules)-MaxRules:] // the oldest rules go: what they purged is gone
	}
	return n
}
