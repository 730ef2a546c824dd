// Package denywatch keeps the current deny list from a file: the runtime
// half of the fast deny channel, a thin user of docwatch over the l7/deny
// format (which holds no runtime, so the control plane can import it).
package denywatch

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/docwatch"
)

// DefaultInterval is how often a Watcher stats its file.
const DefaultInterval = 200 * time.Millisecond

// empty is the list in force before any: a zero List denies nothing.
var empty = &deny.List{}

// Watcher keeps the current deny list from a file. It stats Path every
// Interval and reads it only when its size, mtime or inode changed (or its
// mtime is recent, see docwatch). A file that verifies and has a higher
// sequence than the current list replaces it (an atomic pointer swap) and
// is written to StatePath; anything else is logged, counted and passed to
// OnReject, and the current list stays.
//
// Files are read into two buffers that alternate (docwatch.ReuseBuffers):
// a list that was replaced keeps serving lookups, but its file bytes are
// overwritten, so it must not be given to deny.ParseNext as prev (the
// watcher only ever gives it the list in force).
//
// Call LoadState (optional) before Run; Current and Rejected are safe at
// any time from any goroutine. OnReject and OnApply run on Run's goroutine.
type Watcher struct {
	Path      string // the deny file; written by rename, or in place
	StatePath string // the last applied list ("" disables persisting)
	PublicKey ed25519.PublicKey
	Interval  time.Duration // default DefaultInterval
	Logger    *slog.Logger
	OnReject  func(reason string) // read, too_large, malformed, format, key_id, signature, digest, invalid, stale, older_epoch
	OnApply   func(*deny.List)
	// Parse reads a file that would replace prev (the list in force, never
	// nil); default deny.ParseNext with PublicKey. The agent's streams a
	// whole new list's CIDRs into fresh XDP tries (deny.ParseNextStream).
	Parse func(prev *deny.List, data []byte) (*deny.List, error)

	once sync.Once
	dw   *docwatch.Watcher[*deny.List]                // set once, then used on Run's goroutine
	pub  atomic.Pointer[docwatch.Watcher[*deny.List]] // dw, for Current and Rejected
}

// watcher returns the docwatch behind w, with w's current settings (a
// caller may point StatePath elsewhere between LoadState calls).
func (w *Watcher) watcher() *docwatch.Watcher[*deny.List] {
	w.once.Do(func() {
		w.dw = &docwatch.Watcher[*deny.List]{
			Name:         "deny list",
			ReuseBuffers: true, // an 80 MB list: no fresh buffer per change
			Open: func(prev *deny.List, data []byte) (*deny.List, envelope.Version, error) {
				if prev == nil {
					prev = empty
				}
				parse := w.Parse
				if parse == nil {
					parse = func(prev *deny.List, data []byte) (*deny.List, error) {
						return deny.ParseNext(prev, data, w.PublicKey)
					}
				}
				l, err := parse(prev, data)
				if err != nil {
					return nil, envelope.Version{}, err
				}
				return l, version(l), nil
			},
			Apply: func(l *deny.List, _ envelope.Version) error {
				if w.OnApply != nil {
					w.OnApply(l)
				}
				return nil
			},
			Reason: reason,
			OnReject: func(r docwatch.Refusal) {
				if w.OnReject != nil {
					w.OnReject(r.Reason)
				}
			},
		}
		w.pub.Store(w.dw)
	})
	w.dw.Path, w.dw.StatePath, w.dw.Log = w.Path, w.StatePath, w.Logger
	w.dw.MaxBytes, w.dw.Interval = deny.MaxFileBytes, w.Interval
	if w.dw.Interval <= 0 {
		w.dw.Interval = DefaultInterval
	}
	return w.dw
}

// version orders deny lists: by sequence.
func version(l *deny.List) envelope.Version { return envelope.Version{Sequence: l.Sequence()} }

// Current is the list in force: never nil, an empty list before any.
func (w *Watcher) Current() *deny.List {
	if dw := w.pub.Load(); dw != nil {
		if l, _, ok := dw.Current(); ok {
			return l
		}
	}
	return empty
}

// Rejected counts files and states refused so far.
func (w *Watcher) Rejected() uint64 {
	if dw := w.pub.Load(); dw != nil {
		return dw.Rejected()
	}
	return 0
}

// LoadState applies the persisted list, so revocations survive a restart.
// A missing file is not an error; a bad one is reported and left alone.
func (w *Watcher) LoadState() error { return w.watcher().LoadState() }

// Run polls Path until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	if w.Path == "" {
		return errors.New("deny watcher: no path")
	}
	if len(w.PublicKey) != ed25519.PublicKeySize {
		return fmt.Errorf("deny watcher: public key is %d bytes, want %d", len(w.PublicKey), ed25519.PublicKeySize)
	}
	return w.watcher().Run(ctx)
}

// poll looks at the file once (tests).
func (w *Watcher) poll() { w.watcher().Scan() }

func reason(err error) string {
	switch {
	case errors.Is(err, deny.ErrDigest):
		return "digest"
	case errors.Is(err, deny.ErrSignature):
		return "signature"
	case errors.Is(err, deny.ErrInvalid):
		return "invalid"
	case errors.Is(err, deny.ErrMalformed):
		return "malformed"
	}
	return ""
}
