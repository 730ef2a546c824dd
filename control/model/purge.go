package model

import "time"

// EventPurge is emitted with each change of the purge document.
const EventPurge = "purge.changed"

// PurgeRule is one cache purge: the objects stored before At that match
// every selector set (a route id, a key prefix, a surrogate key).
type PurgeRule struct {
	ID           uint64    `json:"id"`
	At           time.Time `json:"at"`
	Route        string    `json:"route,omitempty"`
	Prefix       string    `json:"prefix,omitempty"`
	SurrogateKey string    `json:"surrogate_key,omitempty"`
	By           string    `json:"by,omitempty"` // the operator token's name
}

// PurgeState is the cache purge channel: the rules still listed and the
// signed document (format/purge) built from them at Sequence.
type PurgeState struct {
	Sequence  uint64      `json:"sequence"`
	Rules     []PurgeRule `json:"rules"`
	UpdatedAt time.Time   `json:"updated_at"`
	File      []byte      `json:"-"`
}
