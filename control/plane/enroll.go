package plane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// Enrolment is a node's new credential: the token is shown this once.
type Enrolment struct {
	ID         string    `json:"id"`
	Token      string    `json:"token"`
	EnrolledAt time.Time `json:"enrolled_at"`
}

// EnrolledNode is a node credential as the API lists it (no hash).
type EnrolledNode struct {
	ID         string     `json:"id"`
	EnrolledAt time.Time  `json:"enrolled_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	LastSeen   *time.Time `json:"last_seen,omitempty"` // its last status report
}

// TokenSHA256 is the hex SHA-256 of a token, as stores and configs keep it.
func TokenSHA256(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// Enroll issues node id a token of its own, bound to the id. Enrolling an
// enrolled (or revoked) id rotates: the old token stops working when the
// transaction commits. A fenced write (the leader only).
func (p *Plane) Enroll(ctx context.Context, id string) (*Enrolment, error) {
	if err := (model.Identity{NodeID: id}).Validate(); err != nil {
		return nil, badRequest("enrol: %v", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("enrol %s: token: %w", id, err)
	}
	e := &Enrolment{ID: id, Token: base64.RawURLEncoding.EncodeToString(b[:]), EnrolledAt: time.Now().UTC().Truncate(time.Microsecond)}
	err := p.update(ctx, func(tx store.Tx) error {
		c := &model.NodeCredential{ID: id, TokenSHA256: TokenSHA256(e.Token), EnrolledAt: e.EnrolledAt}
		if err := tx.PutNodeCredential(ctx, c); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventNodes, id)
	})
	if err != nil {
		return nil, fmt.Errorf("enrol %s: %w", id, err)
	}
	p.log.Info("node enrolled", "node", id)
	return e, nil
}

// Revoke withdraws node id's token: it stops working when the
// transaction commits. store.ErrNotFound when the id was never enrolled;
// revoking a revoked node changes nothing.
func (p *Plane) Revoke(ctx context.Context, id string) error {
	err := p.update(ctx, func(tx store.Tx) error {
		c, err := tx.NodeCredential(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("node %.128q is not enrolled: %w", id, err)
		}
		if err != nil || c.Revoked() {
			return err
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		c.RevokedAt = &now
		if err := tx.PutNodeCredential(ctx, c); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventNodes, id)
	})
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	p.log.Info("node credential revoked", "node", id)
	return nil
}

// EnrolledNodes lists every node credential with the node's last report.
func (p *Plane) EnrolledNodes(ctx context.Context) ([]EnrolledNode, error) {
	var creds []*model.NodeCredential
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		creds, err = tx.NodeCredentials(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	nodes, err := p.st.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]time.Time{}
	for _, n := range nodes {
		seen[n.NodeID] = n.SeenAt
	}
	out := make([]EnrolledNode, 0, len(creds))
	for _, c := range creds {
		en := EnrolledNode{ID: c.ID, EnrolledAt: c.EnrolledAt, RevokedAt: c.RevokedAt}
		if at, ok := seen[c.ID]; ok {
			en.LastSeen = &at
		}
		out = append(out, en)
	}
	return out, nil
}

// NodeByToken returns the credential a node token belongs to (revoked or
// not); store.ErrNotFound when none. Any instance answers.
func (p *Plane) NodeByToken(ctx context.Context, token string) (*model.NodeCredential, error) {
	return p.credential(ctx, func(tx store.Tx) (*model.NodeCredential, error) {
		return tx.NodeCredentialByToken(ctx, TokenSHA256(token))
	})
}

// NodeCredential returns the credential of node id; store.ErrNotFound
// when it was never enrolled.
func (p *Plane) NodeCredential(ctx context.Context, id string) (*model.NodeCredential, error) {
	return p.credential(ctx, func(tx store.Tx) (*model.NodeCredential, error) { return tx.NodeCredential(ctx, id) })
}

func (p *Plane) credential(ctx context.Context, get func(store.Tx) (*model.NodeCredential, error)) (*model.NodeCredential, error) {
	var c *model.NodeCredential
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		c, err = get(tx)
		return err
	})
	return c, err
}
