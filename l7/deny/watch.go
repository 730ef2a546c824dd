package deny

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/snapdir"
)

// DefaultInterval is how often a Watcher stats its file.
const DefaultInterval = 200 * time.Millisecond

// racyWindow: a file whose mtime is this close to when it was read may
// change again without its size or mtime changing (coarse file system
// clocks), so it is read again (and hashed, and ignored if unchanged) until
// a read happens this long after its mtime or after its stat was first seen
// (which also settles an mtime in the future).
const racyWindow = 2 * time.Second

// Watcher keeps the current deny list from a file. It stats Path every
// Interval, and reads it only when its size, mtime or inode changed. A file
// that verifies and has a higher sequence than the current list replaces it
// (an atomic pointer swap) and is written to StatePath; anything else is
// logged, counted and passed to OnReject, and the current list stays.
//
// Call LoadState (optional) before Run; Current is safe at any time from any
// goroutine. OnReject and OnApply run on Run's goroutine.
type Watcher struct {
	Path      string // the deny file; written by rename, or in place
	StatePath string // the last applied list ("" disables persisting)
	PublicKey ed25519.PublicKey
	Interval  time.Duration // default DefaultInterval
	Logger    *slog.Logger
	OnReject  func(reason string) // read, malformed, digest, signature, invalid, stale
	OnApply   func(*List)
	// Parse reads a file that would replace prev; default ParseNext with
	// PublicKey. The agent's streams a whole new list's CIDRs into fresh
	// XDP tries (ParseNextStream).
	Parse func(prev *List, data []byte) (*List, error)

	cur      atomic.Pointer[List]
	rejected atomic.Uint64

	seen    os.FileInfo // at the last read
	seenAt  time.Time   // when seen was first seen
	settled bool        // read racyWindow after seen's mtime, or after seenAt
	last    []byte      // the bytes last read (the list keeps them anyway)
	lastErr string      // last stat or read error, so each is logged once
}

// Current is the list in force: never nil, an empty list before any.
func (w *Watcher) Current() *List {
	if l := w.cur.Load(); l != nil {
		return l
	}
	return emptyList
}

// Rejected counts files and states refused so far.
func (w *Watcher) Rejected() uint64 { return w.rejected.Load() }

func (w *Watcher) parse(data []byte) (*List, error) {
	if w.Parse != nil {
		return w.Parse(w.Current(), data)
	}
	return ParseNext(w.Current(), data, w.PublicKey)
}

func (w *Watcher) log() *slog.Logger {
	if w.Logger == nil {
		return slog.Default()
	}
	return w.Logger
}

// LoadState applies the persisted list, so revocations survive a restart.
// A missing file is not an error; a bad one is reported and left alone.
func (w *Watcher) LoadState() error {
	if w.StatePath == "" {
		return nil
	}
	data, err := os.ReadFile(w.StatePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.reject(w.StatePath, "read", err)
		return fmt.Errorf("read deny state: %w", err)
	}
	l, err := w.parse(data)
	if err != nil {
		w.reject(w.StatePath, reasonOf(err), err)
		return fmt.Errorf("deny state %s: %w", w.StatePath, err)
	}
	if l.seq > w.Current().seq {
		w.cur.Store(l)
		w.log().Info("deny list loaded from state", "sequence", l.seq, "entries", l.Len(), "path", w.StatePath)
		if w.OnApply != nil {
			w.OnApply(l)
		}
	}
	return nil
}

// Run polls Path until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.Path == "" {
		return errors.New("deny watcher: no path")
	}
	if len(w.PublicKey) != ed25519.PublicKeySize {
		return fmt.Errorf("deny watcher: public key is %d bytes, want %d", len(w.PublicKey), ed25519.PublicKeySize)
	}
	iv := w.Interval
	if iv <= 0 {
		iv = DefaultInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *Watcher) poll() {
	info, err := os.Stat(w.Path)
	if err != nil {
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.log().Warn("deny file unavailable; keeping the current list", "path", w.Path, "err", err)
		}
		return
	}
	if !sameStamp(w.seen, info) {
		w.seen, w.seenAt = info, time.Now()
	} else if w.settled {
		return
	}
	readAt := time.Now()
	w.settled = readAt.Sub(info.ModTime()) > racyWindow || readAt.Sub(w.seenAt) > racyWindow
	if info.Size() > MaxFileBytes {
		w.settled = true // not read; its size changes when it is replaced
		w.reject(w.Path, "malformed", fmt.Errorf("%d bytes is over the %d limit", info.Size(), MaxFileBytes))
		return
	}
	data, err := os.ReadFile(w.Path)
	if err != nil {
		w.seen = nil // try again next time
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.reject(w.Path, "read", err)
		}
		return
	}
	w.lastErr = ""
	if bytes.Equal(data, w.last) {
		return // read again only because of the racy window: unchanged
	}
	w.last = data
	l, err := w.parse(data)
	if err != nil {
		w.reject(w.Path, reasonOf(err), err)
		return
	}
	cur := w.Current()
	if l.seq == cur.seq && l.digest == cur.digest {
		return // already in force, e.g. loaded from the state file
	}
	if l.seq <= cur.seq {
		w.reject(w.Path, "stale", fmt.Errorf("sequence %d is not above the current %d", l.seq, cur.seq))
		return
	}
	w.cur.Store(l)
	w.log().Info("deny list applied", "sequence", l.seq, "entries", l.Len(), "sha256", l.DigestHex(),
		"took", time.Since(readAt).Round(time.Microsecond))
	if w.OnApply != nil {
		w.OnApply(l)
	}
	if w.StatePath != "" {
		err := os.MkdirAll(filepath.Dir(w.StatePath), 0o755)
		if err == nil {
			err = snapdir.WriteFileAtomic(w.StatePath, data)
		}
		if err != nil {
			w.log().Error("cannot persist deny list", "path", w.StatePath, "err", err)
		}
	}
}

func sameStamp(a, b os.FileInfo) bool {
	return a != nil && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

func (w *Watcher) reject(path, why string, err error) {
	w.rejected.Add(1)
	w.log().Warn("deny list rejected; keeping the current one", "file", path, "reason", why,
		"sequence", w.Current().seq, "err", err)
	if w.OnReject != nil {
		w.OnReject(why)
	}
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrDigest):
		return "digest"
	case errors.Is(err, ErrSignature):
		return "signature"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	default:
		return "malformed"
	}
}
