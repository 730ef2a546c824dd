package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

// Node credentials: bCreds holds id → credential (JSON), bCredTok the
// token hash → id index.
var (
	bCreds   = []byte("node_credentials")
	bCredTok = []byte("node_credential_tokens")
)

func (t *tx) PutNodeCredential(_ context.Context, c *model.NodeCredential) error {
	if t.ro {
		return errReadOnly
	}
	idx := t.tx.Bucket(bCredTok)
	if owner := idx.Get([]byte(c.TokenSHA256)); owner != nil && string(owner) != c.ID {
		return fmt.Errorf("%w: node credential %s: the token hash belongs to node %s", store.ErrConflict, c.ID, owner)
	}
	var old model.NodeCredential
	switch err := t.get(bCreds, []byte(c.ID), &old); err {
	case nil:
		if old.TokenSHA256 != c.TokenSHA256 {
			if err := idx.Delete([]byte(old.TokenSHA256)); err != nil {
				return fmt.Errorf("embedded store: node credential %s: %w", c.ID, err)
			}
		}
	case store.ErrNotFound:
	default:
		return err
	}
	if err := idx.Put([]byte(c.TokenSHA256), []byte(c.ID)); err != nil {
		return fmt.Errorf("embedded store: node credential %s: %w", c.ID, err)
	}
	return t.put(bCreds, []byte(c.ID), c)
}

func (t *tx) NodeCredential(_ context.Context, id string) (*model.NodeCredential, error) {
	var c model.NodeCredential
	if err := t.get(bCreds, []byte(id), &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func (t *tx) NodeCredentialByToken(ctx context.Context, sha256hex string) (*model.NodeCredential, error) {
	id := t.tx.Bucket(bCredTok).Get([]byte(sha256hex))
	if id == nil {
		return nil, store.ErrNotFound
	}
	return t.NodeCredential(ctx, string(id))
}

func (t *tx) NodeCredentials(context.Context) ([]*model.NodeCredential, error) {
	var out []*model.NodeCredential
	err := t.tx.Bucket(bCreds).ForEach(func(k, v []byte) error {
		var c model.NodeCredential
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("embedded store: decode node credential %q: %w", k, err)
		}
		out = append(out, &c)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}
