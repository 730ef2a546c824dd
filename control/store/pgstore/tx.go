package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/store"
)

type tx struct {
	tx     pgx.Tx
	epoch  uint64
	ro     bool
	events []model.Event
}

var errReadOnly = errors.New("postgres store: write in a read-only transaction")

func (t *tx) Epoch() uint64 { return t.epoch }

func (t *tx) NextSequence(ctx context.Context) (uint64, error) {
	if t.ro {
		return 0, errReadOnly
	}
	var n int64
	if err := t.tx.QueryRow(ctx, "UPDATE counters SET value = value + 1 WHERE name = 'sequence' RETURNING value").Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres store: next sequence: %w", err)
	}
	return uint64(n), nil
}

func seqOf(id string) (int64, error) {
	n, err := model.ParseRevisionID(id)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return int64(n), nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (t *tx) PutRevision(ctx context.Context, r *model.Revision, snap []byte) error {
	if t.ro {
		return errReadOnly
	}
	seq, err := seqOf(r.ID)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, "INSERT INTO revisions (seq, id, idempotency_key, doc, snapshot) VALUES ($1, $2, $3, $4, $5)",
		seq, r.ID, nullable(r.IdempotencyKey), doc, snap)
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" {
		return fmt.Errorf("%w: revision %s or idempotency key %q exists", store.ErrConflict, r.ID, r.IdempotencyKey)
	}
	if err != nil {
		return fmt.Errorf("postgres store: put revision %s: %w", r.ID, err)
	}
	return nil
}

// one scans a single JSON document into v; ErrNotFound when there is none.
func (t *tx) one(ctx context.Context, v any, query string, args ...any) error {
	var doc []byte
	err := t.tx.QueryRow(ctx, query, args...).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("postgres store: decode: %w", err)
	}
	return nil
}

func (t *tx) Revision(ctx context.Context, id string) (*model.Revision, error) {
	seq, err := seqOf(id)
	if err != nil {
		return nil, err
	}
	var r model.Revision
	if err := t.one(ctx, &r, "SELECT doc FROM revisions WHERE seq = $1", seq); err != nil {
		return nil, err
	}
	return &r, nil
}

func (t *tx) RevisionByKey(ctx context.Context, key string) (*model.Revision, error) {
	var r model.Revision
	if err := t.one(ctx, &r, "SELECT doc FROM revisions WHERE idempotency_key = $1", key); err != nil {
		return nil, err
	}
	return &r, nil
}

// docs scans rows of one JSON document each.
func docs[T any](rows pgx.Rows, err error) ([]*T, error) {
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, fmt.Errorf("postgres store: %w", err)
		}
		v := new(T)
		if err := json.Unmarshal(doc, v); err != nil {
			return nil, fmt.Errorf("postgres store: decode: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (t *tx) Revisions(ctx context.Context, before uint64, limit int) ([]*model.Revision, error) {
	if before == 0 {
		return docs[model.Revision](t.tx.Query(ctx, "SELECT doc FROM revisions ORDER BY seq DESC LIMIT $1", limit))
	}
	return docs[model.Revision](t.tx.Query(ctx, "SELECT doc FROM revisions WHERE seq < $1 ORDER BY seq DESC LIMIT $2", int64(before), limit))
}

func (t *tx) Snapshot(ctx context.Context, id string) ([]byte, error) {
	seq, err := seqOf(id)
	if err != nil {
		return nil, err
	}
	var snap []byte
	err = t.tx.QueryRow(ctx, "SELECT snapshot FROM revisions WHERE seq = $1", seq).Scan(&snap)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: snapshot %s: %w", id, err)
	}
	return snap, nil
}

func (t *tx) PutRollout(ctx context.Context, r *model.Rollout) error {
	if t.ro {
		return errReadOnly
	}
	seq, err := seqOf(r.Revision)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO rollouts (seq, id, open, doc) VALUES ($1, $2, $3, $4)
		ON CONFLICT (seq) DO UPDATE SET open = excluded.open, doc = excluded.doc`, seq, r.Revision, r.Open(), doc)
	if err != nil {
		return fmt.Errorf("postgres store: put rollout %s: %w", r.Revision, err)
	}
	return nil
}

func (t *tx) Rollout(ctx context.Context, id string) (*model.Rollout, error) {
	seq, err := seqOf(id)
	if err != nil {
		return nil, err
	}
	var r model.Rollout
	if err := t.one(ctx, &r, "SELECT doc FROM rollouts WHERE seq = $1", seq); err != nil {
		return nil, err
	}
	return &r, nil
}

func (t *tx) Rollouts(ctx context.Context, open bool, limit int) ([]*model.Rollout, error) {
	if open {
		return docs[model.Rollout](t.tx.Query(ctx, "SELECT doc FROM rollouts WHERE open ORDER BY seq LIMIT $1", limit))
	}
	return docs[model.Rollout](t.tx.Query(ctx, "SELECT doc FROM rollouts ORDER BY seq DESC LIMIT $1", limit))
}

func (t *tx) Fleet(ctx context.Context) (*model.Fleet, error) {
	var f model.Fleet
	if err := t.one(ctx, &f, "SELECT doc FROM singletons WHERE name = 'fleet'"); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return &f, nil
}

func (t *tx) putSingleton(ctx context.Context, name string, v any, data []byte) error {
	if t.ro {
		return errReadOnly
	}
	doc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO singletons (name, doc, data) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, data = excluded.data`, name, doc, data)
	if err != nil {
		return fmt.Errorf("postgres store: put %s: %w", name, err)
	}
	return nil
}

func (t *tx) PutFleet(ctx context.Context, f *model.Fleet) error {
	return t.putSingleton(ctx, "fleet", f, nil)
}

func (t *tx) Deny(ctx context.Context) (*model.DenyState, error) {
	var d model.DenyState
	var doc, file []byte
	err := t.tx.QueryRow(ctx, "SELECT doc, data FROM singletons WHERE name = 'deny'").Scan(&doc, &file)
	if errors.Is(err, pgx.ErrNoRows) {
		return &d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: deny: %w", err)
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("postgres store: decode deny: %w", err)
	}
	d.File = file
	return &d, nil
}

func (t *tx) PutDeny(ctx context.Context, d *model.DenyState) error {
	return t.putSingleton(ctx, "deny", d, d.File)
}

func (t *tx) RegionControl(ctx context.Context) (*model.RegionControl, error) {
	var c model.RegionControl
	if err := t.one(ctx, &c, "SELECT doc FROM region_control WHERE id = 1"); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return &c, nil
}

func (t *tx) PutRegionControl(ctx context.Context, c *model.RegionControl) error {
	if t.ro {
		return errReadOnly
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO region_control (id, doc, max_writer_epoch) VALUES (1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, max_writer_epoch = excluded.max_writer_epoch`, doc, int64(maxWriterEpoch(c)))
	if err != nil {
		return fmt.Errorf("postgres store: put region control: %w", err)
	}
	return nil
}

func maxWriterEpoch(c *model.RegionControl) uint64 {
	var m uint64
	for _, w := range c.Writers {
		m = max(m, w.Epoch)
	}
	return m
}

func (t *tx) Purge(ctx context.Context) (*model.PurgeState, error) {
	var p model.PurgeState
	var doc, file []byte
	err := t.tx.QueryRow(ctx, "SELECT doc, file FROM purge WHERE id = 1").Scan(&doc, &file)
	if errors.Is(err, pgx.ErrNoRows) {
		return &p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres store: purge: %w", err)
	}
	if err := json.Unmarshal(doc, &p); err != nil {
		return nil, fmt.Errorf("postgres store: decode purge: %w", err)
	}
	p.File = file
	return &p, nil
}

func (t *tx) PutPurge(ctx context.Context, p *model.PurgeState) error {
	if t.ro {
		return errReadOnly
	}
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	file := p.File
	if file == nil {
		file = []byte{}
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO purge (id, doc, file, sequence) VALUES (1, $1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET doc = excluded.doc, file = excluded.file, sequence = excluded.sequence`, doc, file, int64(p.Sequence))
	if err != nil {
		return fmt.Errorf("postgres store: put purge sequence %d: %w", p.Sequence, err)
	}
	return nil
}

func (t *tx) Emit(ctx context.Context, kind, subject string) error {
	if t.ro {
		return errReadOnly
	}
	e := model.Event{Epoch: t.epoch, Kind: kind, Subject: subject}
	err := t.tx.QueryRow(ctx, "INSERT INTO events (epoch, kind, subject) VALUES ($1, $2, $3) RETURNING id, at",
		int64(t.epoch), kind, subject).Scan(&e.ID, &e.At)
	if err != nil {
		return fmt.Errorf("postgres store: emit %s: %w", kind, err)
	}
	t.events = append(t.events, e)
	return nil
}
