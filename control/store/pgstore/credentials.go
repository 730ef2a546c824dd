package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

func (t *tx) PutNodeCredential(ctx context.Context, c *model.NodeCredential) error {
	if t.ro {
		return errReadOnly
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO node_credentials (id, token_sha256, enrolled_at, revoked_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET token_sha256 = excluded.token_sha256, enrolled_at = excluded.enrolled_at,
			revoked_at = excluded.revoked_at`, c.ID, c.TokenSHA256, c.EnrolledAt, c.RevokedAt)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: node credential %s: the token hash belongs to another node", store.ErrConflict, c.ID)
	}
	if err != nil {
		return fmt.Errorf("postgres store: put node credential %s: %w", c.ID, err)
	}
	return nil
}

const credCols = "SELECT id, token_sha256, enrolled_at, revoked_at FROM node_credentials"

func scanCred(row pgx.Row) (*model.NodeCredential, error) {
	var c model.NodeCredential
	err := row.Scan(&c.ID, &c.TokenSHA256, &c.EnrolledAt, &c.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: node credential: %w", err)
	}
	c.EnrolledAt = c.EnrolledAt.UTC()
	if c.RevokedAt != nil {
		r := c.RevokedAt.UTC()
		c.RevokedAt = &r
	}
	return &c, nil
}

func (t *tx) NodeCredential(ctx context.Context, id string) (*model.NodeCredential, error) {
	return scanCred(t.tx.QueryRow(ctx, credCols+" WHERE id = $1", id))
}

func (t *tx) NodeCredentialByToken(ctx context.Context, sha256hex string) (*model.NodeCredential, error) {
	return scanCred(t.tx.QueryRow(ctx, credCols+" WHERE token_sha256 = $1", sha256hex))
}

func (t *tx) NodeCredentials(ctx context.Context) ([]*model.NodeCredential, error) {
	rows, err := t.tx.Query(ctx, credCols+" ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("postgres store: node credentials: %w", err)
	}
	defer rows.Close()
	var out []*model.NodeCredential
	for rows.Next() {
		c, err := scanCred(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
