package model

import "time"

// EventNodes says a node credential was enrolled, rotated or revoked.
const EventNodes = "nodes.changed"

// NodeCredential is a node's own credential: the SHA-256 (hex) of the
// token the control plane issued it at enrolment. The token itself is
// shown once and never stored. A revoked credential keeps its record.
type NodeCredential struct {
	ID          string     `json:"id"`
	TokenSHA256 string     `json:"token_sha256"`
	EnrolledAt  time.Time  `json:"enrolled_at"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
}

// Revoked says whether the credential was revoked.
func (c *NodeCredential) Revoked() bool { return c.RevokedAt != nil }
