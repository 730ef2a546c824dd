package plane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/revision"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Submission is a config submitted for a new revision.
type Submission struct {
	Body        []byte
	ContentType string // application/json, or YAML
	// IdempotencyKey: a second submission with the same key gets the
	// revision of the first (the same body is required).
	IdempotencyKey string
	Message        string
}

// Bounds of submission metadata.
const (
	MaxIdempotencyKeyBytes = 255
	MaxMessageBytes        = 1024
)

// Submit validates and compiles a config (the checks of `rampart snapshot
// build`, plus the proxy's route table build), gives it the next version
// (this instance's epoch, the next sequence), signs and stores it with a
// pending rollout. It returns the revision and whether it was created now
// (false: the idempotency key named an existing one). Validation problems
// come back as a *snapshot.ValidationError listing each.
func (p *Plane) Submit(ctx context.Context, s Submission) (*model.Revision, bool, error) {
	if err := checkText("Idempotency-Key", s.IdempotencyKey, MaxIdempotencyKeyBytes); err != nil {
		return nil, false, err
	}
	if err := checkText("message", s.Message, MaxMessageBytes); err != nil {
		return nil, false, err
	}
	sum := sha256.Sum256(s.Body)
	bodySum := hex.EncodeToString(sum[:])
	if s.IdempotencyKey != "" {
		if r, err := p.byKey(ctx, s.IdempotencyKey, bodySum); r != nil || err != nil {
			return r, false, err
		}
	}
	cfg, err := revision.Parse(s.Body, s.ContentType)
	if err != nil {
		return nil, false, badRequest("%v", err)
	}
	if err := revision.Check(cfg, snapshot.Version{Epoch: 1, Sequence: 1}); err != nil {
		return nil, false, err
	}
	var rev *model.Revision
	err = p.update(ctx, func(tx store.Tx) error {
		var err error
		rev, err = p.publish(ctx, tx, cfg, model.Revision{Kind: model.KindSubmitted, Message: s.Message,
			IdempotencyKey: s.IdempotencyKey, BodySHA256: bodySum})
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		ro := &model.Rollout{Revision: rev.ID, Version: rev.Version, State: model.StatePending, Stage: -1, CreatedAt: now, UpdatedAt: now}
		if err := tx.PutRollout(ctx, ro); err != nil {
			return err
		}
		return tx.Emit(ctx, model.EventRevision, rev.ID)
	})
	if errors.Is(err, store.ErrConflict) && s.IdempotencyKey != "" { // a concurrent submission with the key won
		if r, kerr := p.byKey(ctx, s.IdempotencyKey, bodySum); r != nil || kerr != nil {
			return r, false, kerr
		}
	}
	if err != nil {
		return nil, false, err
	}
	p.wakeEngine()
	p.log.Info("revision created", "revision", rev.ID, "version", rev.Version.String(), "routes", rev.Routes, "compile_ms", rev.CompileMs)
	return rev, true, nil
}

// byKey returns the revision an idempotency key names (nil if none), or
// a conflict when it was made from a different body.
func (p *Plane) byKey(ctx context.Context, key, bodySum string) (*model.Revision, error) {
	var r *model.Revision
	err := p.st.View(ctx, func(tx store.Tx) error {
		var err error
		r, err = tx.RevisionByKey(ctx, key)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.BodySHA256 != bodySum {
		return nil, fmt.Errorf("%w: Idempotency-Key %q was used for revision %s with a different body", store.ErrConflict, key, r.ID)
	}
	return r, nil
}

// publish compiles cfg under the next version and stores it as a
// revision with the metadata of meta.
func (p *Plane) publish(ctx context.Context, tx store.Tx, cfg *snapshot.Config, meta model.Revision) (*model.Revision, error) {
	seq, err := tx.NextSequence(ctx)
	if err != nil {
		return nil, err
	}
	v := snapshot.Version{Epoch: tx.Epoch(), Sequence: seq}
	now := time.Now()
	file, err := revision.Build(cfg, v, p.o.Key, now)
	if err != nil {
		return nil, err
	}
	r := meta
	r.ID, r.Version, r.CreatedAt = model.RevisionID(seq), v, now.UTC()
	r.SHA256 = fileDigest(file)
	unversioned := *cfg // normalised by Build
	unversioned.Version = snapshot.Version{}
	if canon, err := json.Marshal(&unversioned); err == nil {
		sum := sha256.Sum256(canon)
		r.ConfigSHA256 = hex.EncodeToString(sum[:])
	}
	r.Routes, r.Clusters, r.SnapshotBytes = len(cfg.Routes), len(cfg.Clusters), len(file)
	r.CompileMs = float64(time.Since(now).Microseconds()) / 1000
	if err := tx.PutRevision(ctx, &r, file); err != nil {
		return nil, err
	}
	return &r, nil
}

// fileDigest is the digest a snapshot file just built names (its
// envelope's manifest digest, what nodes report as active_sha256).
func fileDigest(file []byte) string {
	d, err := snapshot.FileDigest(file)
	if err != nil {
		return ""
	}
	return d
}

// configOf decodes a stored revision's config (verifying its file).
func (p *Plane) configOf(ctx context.Context, tx store.Tx, id string) (*snapshot.Config, error) {
	file, err := tx.Snapshot(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", id, err)
	}
	s, err := snapshot.Parse(file, p.pub)
	if err != nil {
		return nil, fmt.Errorf("revision %s: stored snapshot: %w", id, err)
	}
	return s.Config, nil
}

// republish publishes revision src's config again under the next version.
func (p *Plane) republish(ctx context.Context, tx store.Tx, src, kind, message string) (*model.Revision, error) {
	cfg, err := p.configOf(ctx, tx, src)
	if err != nil {
		return nil, err
	}
	return p.publish(ctx, tx, cfg, model.Revision{Kind: kind, Source: src, Message: message})
}

func checkText(what, s string, max int) error {
	if len(s) > max {
		return badRequest("%s is %d bytes, over the %d limit", what, len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return badRequest("%s has a control character", what)
		}
	}
	return nil
}
