// Package snapdir feeds a proxy (or the agent) from a directory of
// snapshot files: a thin user of docwatch that opens *.snap files with
// snapshot.ParseNext, hands the newest valid one to a Target, and keeps the
// last one that went active as the last-known-good, so a restart with no
// source serves it.
package snapdir

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/docwatch"
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

// Watcher polls Dir for *.snap files. Set the fields before the first call;
// LoadLastKnownGood, Scan and Run run on one goroutine.
type Watcher struct {
	Dir       string // watched; files ending in .snap, others ignored
	StateDir  string // where the last-known-good is kept ("" disables it)
	PublicKey ed25519.PublicKey
	Interval  time.Duration // poll period, default 250ms
	Target    Target
	Log       *slog.Logger

	once sync.Once
	dw   *docwatch.Watcher[*snapshot.Snapshot]
}

// Refusal is a snapshot file the watcher refused: its version (zero when
// it could not be read), the reason it counts under (read, too_large,
// malformed, format, key_id, signature, digest, invalid, stale,
// older_epoch, build), and the error.
type Refusal struct {
	Version snapshot.Version `json:"version"`
	Reason  string           `json:"reason"`
	Error   string           `json:"error"`
	File    string           `json:"file"`
	At      time.Time        `json:"at"`
}

func (w *Watcher) watcher() *docwatch.Watcher[*snapshot.Snapshot] {
	w.once.Do(func() {
		state := ""
		if w.StateDir != "" {
			state = filepath.Join(w.StateDir, LastKnownGood)
		}
		w.dw = &docwatch.Watcher[*snapshot.Snapshot]{
			Name:      "snapshot",
			Dir:       w.Dir,
			Suffix:    ".snap",
			StatePath: state,
			MaxBytes:  snapshot.MaxFileBytes,
			Interval:  w.Interval,
			Open:      w.open,
			Apply: func(s *snapshot.Snapshot, _ envelope.Version) error {
				return w.Target.Apply(s)
			},
			Reason:   reason,
			OnReject: func(r docwatch.Refusal) { w.Target.RejectSnapshot(r.Reason) },
			Log:      w.Log,
		}
	})
	return w.dw
}

// open verifies a file against the snapshot in force, reporting the
// version it claims as desired and, once verified, as downloaded.
func (w *Watcher) open(prev *snapshot.Snapshot, data []byte) (*snapshot.Snapshot, envelope.Version, error) {
	peeked, perr := snapshot.PeekVersion(data)
	if perr == nil {
		w.Target.SetSourceVersions(peeked, snapshot.Version{})
	}
	claimed := envelope.Version{Epoch: peeked.Epoch, Sequence: peeked.Sequence}
	s, err := snapshot.ParseNext(prev, data, w.PublicKey)
	if err != nil {
		return nil, claimed, err
	}
	w.Target.SetSourceVersions(s.Version, s.Version)
	return s, envelope.Version{Epoch: s.Version.Epoch, Sequence: s.Version.Sequence}, nil
}

func reason(err error) string {
	switch {
	case errors.Is(err, docwatch.ErrApply):
		return "build"
	case errors.Is(err, snapshot.ErrInvalid):
		return "invalid"
	}
	return ""
}

// LoadLastKnownGood applies the persisted snapshot, if there is one. A
// missing file is not an error; a bad one is reported and left alone.
func (w *Watcher) LoadLastKnownGood() error { return w.watcher().LoadState() }

// Run scans until ctx ends.
func (w *Watcher) Run(ctx context.Context) error { return w.watcher().Run(ctx) }

// Scan looks at every new or changed file once: files that fail
// verification, or that are not newer than the active snapshot, are logged
// and counted; the newest verified one is applied and persisted.
func (w *Watcher) Scan() { w.watcher().Scan() }

// LastRefusal is the last snapshot file refused, or nil.
func (w *Watcher) LastRefusal() *Refusal {
	r := w.watcher().LastRefusal()
	if r == nil {
		return nil
	}
	return &Refusal{Version: snapshot.Version{Epoch: r.Version.Epoch, Sequence: r.Version.Sequence},
		Reason: r.Reason, Error: r.Error, File: r.File, At: r.At}
}
