// Package snapdir feeds a proxy from a directory of snapshot files: it
// verifies each new file, hands the newest valid one over, and keeps the
// last one that went active on disk as the last-known-good, so a restart
// with no source serves it.
package snapdir

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Target receives verified snapshots; *proxy.Proxy is one.
type Target interface {
	Apply(*snapshot.Snapshot) error
	SetSourceVersions(desired, downloaded snapshot.Version)
	RejectSnapshot(reason string)
}

// LastKnownGood is the file name of the persisted snapshot in the state dir.
const LastKnownGood = "last-known-good.snap"

// Watcher polls Dir for *.snap files.
type Watcher struct {
	Dir       string // watched; files ending in .snap, others ignored
	StateDir  string // where the last-known-good is kept ("" disables it)
	PublicKey ed25519.PublicKey
	Interval  time.Duration // poll period, default 250ms
	Target    Target
	Log       *slog.Logger

	seen    map[string]stamp
	active  snapshot.Version
	scanned bool // the first scan (files present at start) is done

	mu      sync.Mutex
	refusal *Refusal // the last file refused
}

// Refusal is a snapshot file the watcher refused: its version (zero when
// it could not be read), the reason it counts under, and the error.
type Refusal struct {
	Version snapshot.Version `json:"version"`
	Reason  string           `json:"reason"` // read, digest, signature, invalid, malformed, stale, older_epoch, build
	Error   string           `json:"error"`
	File    string           `json:"file"`
	At      time.Time        `json:"at"`
}

// LastRefusal is the last snapshot file refused, or nil.
func (w *Watcher) LastRefusal() *Refusal {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refusal == nil {
		return nil
	}
	r := *w.refusal
	return &r
}

type stamp struct {
	size  int64
	mtime time.Time
}

func (w *Watcher) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

// LoadLastKnownGood applies the persisted snapshot, if there is one. A
// missing file is not an error; a bad one is reported and left alone.
func (w *Watcher) LoadLastKnownGood() error {
	if w.StateDir == "" {
		return nil
	}
	path := filepath.Join(w.StateDir, LastKnownGood)
	data, err := readFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.Target.RejectSnapshot(readReason(err))
		return fmt.Errorf("read last-known-good: %w", err)
	}
	s, err := snapshot.Parse(data, w.PublicKey)
	if err != nil {
		w.Target.RejectSnapshot(reason(err))
		return fmt.Errorf("last-known-good %s: %w", path, err)
	}
	if err := w.Target.Apply(s); err != nil {
		w.Target.RejectSnapshot("build")
		return fmt.Errorf("apply last-known-good %s: %w", path, err)
	}
	w.active = s.Version
	w.Target.SetSourceVersions(s.Version, s.Version)
	w.log().Info("serving last-known-good snapshot", "version", s.Version.String(), "path", path)
	return nil
}

// Run scans until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	iv := w.Interval
	if iv <= 0 {
		iv = 250 * time.Millisecond
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		w.Scan()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type candidate struct {
	path string
	data []byte
	snap *snapshot.Snapshot
}

// Scan looks at every new or changed file once: files that fail
// verification, or that are not newer than the active snapshot, are logged
// and counted; the newest verified one is applied and persisted.
func (w *Watcher) Scan() {
	if w.seen == nil {
		w.seen = map[string]stamp{}
	}
	entries, err := os.ReadDir(w.Dir)
	if err != nil {
		w.log().Warn("cannot read snapshot dir", "dir", w.Dir, "err", err)
		return
	}
	var good []candidate
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".snap") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		st := stamp{info.Size(), info.ModTime()}
		if w.seen[name] == st {
			continue
		}
		w.seen[name] = st
		path := filepath.Join(w.Dir, name)
		data, err := readFile(path)
		if err != nil {
			w.reject(path, snapshot.Version{}, readReason(err), err)
			continue
		}
		peeked, perr := snapshot.PeekVersion(data)
		if perr == nil {
			w.Target.SetSourceVersions(peeked, snapshot.Version{})
		}
		s, err := snapshot.Parse(data, w.PublicKey)
		if err != nil {
			w.reject(path, peeked, reason(err), err)
			continue
		}
		w.Target.SetSourceVersions(s.Version, s.Version)
		good = append(good, candidate{path, data, s})
	}
	sort.Slice(good, func(i, j int) bool { return good[j].snap.Version.Less(good[i].snap.Version) })
	first := !w.scanned
	w.scanned = true
	for i, c := range good {
		if i > 0 || !w.active.Less(c.snap.Version) {
			if first {
				// Files already there at start (the history a node keeps, or
				// the one the last-known-good came from) are not news.
				w.log().Debug("older snapshot file ignored", "file", c.path, "version", c.snap.Version.String())
				continue
			}
			why := "stale"
			if c.snap.Version.Epoch < w.active.Epoch {
				why = "older_epoch"
			}
			w.reject(c.path, c.snap.Version, why, fmt.Errorf("version %s is not newer than %s", c.snap.Version, w.active))
			continue
		}
		if err := w.Target.Apply(c.snap); err != nil {
			w.reject(c.path, c.snap.Version, "build", err)
			continue
		}
		w.active = c.snap.Version
		if err := w.persist(c.data); err != nil {
			w.log().Error("cannot persist last-known-good", "err", err)
		}
	}
}

func (w *Watcher) reject(path string, v snapshot.Version, why string, err error) {
	w.Target.RejectSnapshot(why)
	w.mu.Lock()
	w.refusal = &Refusal{Version: v, Reason: why, Error: err.Error(), File: path, At: time.Now().UTC()}
	w.mu.Unlock()
	w.log().Warn("snapshot rejected", "file", path, "version", v.String(), "reason", why, "err", err)
}

// persist writes the snapshot as the last-known-good: temp file, fsync,
// rename, fsync of the directory, so a crash leaves the old or the new file
// whole.
func (w *Watcher) persist(data []byte) error {
	if w.StateDir == "" {
		return nil
	}
	if err := os.MkdirAll(w.StateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	return WriteFileAtomic(filepath.Join(w.StateDir, LastKnownGood), data)
}

// WriteFileAtomic replaces path with data so that readers see either the
// old or the new content, never a part.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// readReason and reason name why a file was refused, for
// rampart_snapshot_rejected_total: when reading it, and when verifying it.
func readReason(err error) string {
	if errors.Is(err, errTooLarge) {
		return "too_large"
	}
	return "read"
}

func reason(err error) string {
	switch {
	case errors.Is(err, snapshot.ErrDigest):
		return "digest"
	case errors.Is(err, snapshot.ErrSignature):
		return "signature"
	case errors.Is(err, snapshot.ErrKeyID):
		return "key_id"
	case errors.Is(err, snapshot.ErrInvalid):
		return "invalid"
	default:
		return "malformed"
	}
}
