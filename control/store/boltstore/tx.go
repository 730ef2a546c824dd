package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

type tx struct {
	tx     *bolt.Tx
	epoch  uint64
	ro     bool
	events []model.Event
}

func (t *tx) Epoch() uint64 { return t.epoch }

func seqKey(id string) ([]byte, error) {
	n, err := model.ParseRevisionID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return binary.BigEndian.AppendUint64(nil, n), nil
}

func (t *tx) NextSequence(context.Context) (uint64, error) {
	if t.ro {
		return 0, errReadOnly
	}
	m := t.tx.Bucket(bMeta)
	n := getUint(m, kSeq) + 1
	return n, putUint(m, kSeq, n)
}

func (t *tx) put(bucket, key []byte, v any) error {
	if t.ro {
		return errReadOnly
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("embedded store: encode %s: %w", bucket, err)
	}
	return t.tx.Bucket(bucket).Put(key, data)
}

func (t *tx) get(bucket, key []byte, v any) error {
	data := t.tx.Bucket(bucket).Get(key)
	if data == nil {
		return store.ErrNotFound
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("embedded store: decode %s %q: %w", bucket, key, err)
	}
	return nil
}

func (t *tx) PutRevision(_ context.Context, r *model.Revision, snap []byte) error {
	if t.ro {
		return errReadOnly
	}
	k, err := seqKey(r.ID)
	if err != nil {
		return err
	}
	if t.tx.Bucket(bRevisions).Get(k) != nil {
		return fmt.Errorf("%w: revision %s exists", store.ErrConflict, r.ID)
	}
	if r.IdempotencyKey != "" {
		ib := t.tx.Bucket(bIdem)
		if ib.Get([]byte(r.IdempotencyKey)) != nil {
			return fmt.Errorf("%w: idempotency key %q is taken", store.ErrConflict, r.IdempotencyKey)
		}
		if err := ib.Put([]byte(r.IdempotencyKey), []byte(r.ID)); err != nil {
			return err
		}
	}
	if err := t.tx.Bucket(bSnapshots).Put(k, snap); err != nil {
		return err
	}
	return t.put(bRevisions, k, r)
}

func (t *tx) Revision(_ context.Context, id string) (*model.Revision, error) {
	k, err := seqKey(id)
	if err != nil {
		return nil, err
	}
	var r model.Revision
	if err := t.get(bRevisions, k, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (t *tx) RevisionByKey(ctx context.Context, key string) (*model.Revision, error) {
	id := t.tx.Bucket(bIdem).Get([]byte(key))
	if id == nil {
		return nil, store.ErrNotFound
	}
	return t.Revision(ctx, string(id))
}

func (t *tx) Revisions(_ context.Context, before uint64, limit int) ([]*model.Revision, error) {
	var out []*model.Revision
	c := t.tx.Bucket(bRevisions).Cursor()
	var k, v []byte
	if before == 0 {
		k, v = c.Last()
	} else {
		if sk, _ := c.Seek(binary.BigEndian.AppendUint64(nil, before)); sk == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil && len(out) < limit; k, v = c.Prev() {
		var r model.Revision
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("embedded store: decode revision: %w", err)
		}
		out = append(out, &r)
	}
	return out, nil
}

func (t *tx) Snapshot(_ context.Context, id string) ([]byte, error) {
	k, err := seqKey(id)
	if err != nil {
		return nil, err
	}
	data := t.tx.Bucket(bSnapshots).Get(k)
	if data == nil {
		return nil, store.ErrNotFound
	}
	return bytes.Clone(data), nil
}

func (t *tx) PutRollout(_ context.Context, r *model.Rollout) error {
	k, err := seqKey(r.Revision)
	if err != nil {
		return err
	}
	return t.put(bRollouts, k, r)
}

func (t *tx) Rollout(_ context.Context, id string) (*model.Rollout, error) {
	k, err := seqKey(id)
	if err != nil {
		return nil, err
	}
	var r model.Rollout
	if err := t.get(bRollouts, k, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

func (t *tx) Rollouts(_ context.Context, open bool, limit int) ([]*model.Rollout, error) {
	var out []*model.Rollout
	c := t.tx.Bucket(bRollouts).Cursor()
	first, step := c.Last, c.Prev
	if open {
		first, step = c.First, c.Next
	}
	for k, v := first(); k != nil && len(out) < limit; k, v = step() {
		var r model.Rollout
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, fmt.Errorf("embedded store: decode rollout: %w", err)
		}
		if !open || r.Open() {
			out = append(out, &r)
		}
	}
	return out, nil
}

func (t *tx) Fleet(context.Context) (*model.Fleet, error) {
	var f model.Fleet
	if err := t.get(bMeta, kFleet, &f); err != nil && err != store.ErrNotFound {
		return nil, err
	}
	return &f, nil
}

func (t *tx) PutFleet(_ context.Context, f *model.Fleet) error { return t.put(bMeta, kFleet, f) }

func (t *tx) Deny(context.Context) (*model.DenyState, error) {
	var d model.DenyState
	if err := t.get(bMeta, kDeny, &d); err != nil && err != store.ErrNotFound {
		return nil, err
	}
	d.File = bytes.Clone(t.tx.Bucket(bMeta).Get(kDenyF))
	return &d, nil
}

func (t *tx) PutDeny(_ context.Context, d *model.DenyState) error {
	if err := t.put(bMeta, kDeny, d); err != nil {
		return err
	}
	return t.tx.Bucket(bMeta).Put(kDenyF, d.File)
}

func (t *tx) RegionControl(context.Context) (*model.RegionControl, error) {
	var c model.RegionControl
	if err := t.get(bMeta, kRegions, &c); err != nil && err != store.ErrNotFound {
		return nil, err
	}
	return &c, nil
}

func (t *tx) PutRegionControl(_ context.Context, c *model.RegionControl) error {
	return t.put(bMeta, kRegions, c)
}

func (t *tx) Purge(context.Context) (*model.PurgeState, error) {
	var p model.PurgeState
	if err := t.get(bMeta, kPurge, &p); err != nil && err != store.ErrNotFound {
		return nil, err
	}
	p.File = bytes.Clone(t.tx.Bucket(bMeta).Get(kPurgeF))
	return &p, nil
}

func (t *tx) PutPurge(ctx context.Context, p *model.PurgeState) error {
	if t.ro {
		return errReadOnly
	}
	cur, err := t.Purge(ctx)
	if err != nil {
		return err
	}
	if p.Sequence < cur.Sequence {
		return fmt.Errorf("embedded store: purge sequence %d would go back from %d", p.Sequence, cur.Sequence)
	}
	if err := t.put(bMeta, kPurge, p); err != nil {
		return err
	}
	return t.tx.Bucket(bMeta).Put(kPurgeF, p.File)
}

func (t *tx) Emit(_ context.Context, kind, subject string) error {
	if t.ro {
		return errReadOnly
	}
	t.events = append(t.events, model.Event{Epoch: t.epoch, Kind: kind, Subject: subject, At: time.Now().UTC()})
	return nil
}
