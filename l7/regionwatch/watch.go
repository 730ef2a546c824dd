// Package regionwatch keeps a proxy's (or an agent's) current region-state
// document (format/regionstate): it polls one signed file, applies a newer
// version within a poll period, never goes back to an equal or lower
// version, keeps the last good document when a file is bad (counting the
// refusal by reason), persists the last good bytes, and tells its consumer
// whether the document is fresh. A stale or absent document means every
// signal is unknown.
package regionwatch

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// Defaults and bounds of Config.
const (
	DefaultMaxAge   = 30 * time.Second
	MinMaxAge       = time.Second
	MaxMaxAge       = 24 * time.Hour
	DefaultInterval = 250 * time.Millisecond // also the longest allowed
)

// racyWindow: a file whose mtime is this close to when it was read may
// change again without its size or mtime changing (coarse file system
// clocks), so it is read again (and ignored if its bytes are unchanged)
// until a read happens this long after its mtime or after it was first seen.
const racyWindow = 2 * time.Second

// Config of a Watcher.
type Config struct {
	Path      string // the signed region-state file, replaced by rename or written in place
	StatePath string // where the last good document is kept ("" : not kept)
	PublicKey ed25519.PublicKey
	// MaxAge: a document whose Created time is further than this from now
	// (either way: a producer clock ahead by more than MaxAge counts too)
	// is stale. Default DefaultMaxAge, MinMaxAge..MaxMaxAge.
	MaxAge   time.Duration
	Interval time.Duration // poll period; default and at most DefaultInterval
	Logger   *slog.Logger
	// OnApply, when set, is called on Run's (or LoadState's) goroutine with
	// every document applied.
	OnApply func(*regionstate.State)
}

// Refusal is the last file the watcher refused.
type Refusal struct {
	Version string    `json:"version,omitempty"` // epoch.sequence when it could be read
	Reason  string    `json:"reason"`
	Error   string    `json:"error"`
	File    string    `json:"file"`
	At      time.Time `json:"at"`
}

// Watcher keeps the current region-state document of one file. Current and
// Status are safe from any goroutine; Run and LoadState are not concurrent.
type Watcher struct {
	c   Config
	m   *metrics
	now func() time.Time

	cur     atomic.Pointer[regionstate.State]
	applied atomic.Pointer[time.Time] // when cur was applied

	mu      sync.Mutex
	refusal *Refusal

	// Run's own
	seen    os.FileInfo
	seenAt  time.Time
	settled bool
	last    []byte
	lastErr string
}

// New checks c, fills its defaults and makes a Watcher. Its metrics are
// registered with Register.
func New(c Config) (*Watcher, error) {
	if c.Path == "" {
		return nil, errors.New("region-state watcher: no file")
	}
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("region-state watcher: public key is %d bytes, want %d", len(c.PublicKey), ed25519.PublicKeySize)
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxAge < MinMaxAge || c.MaxAge > MaxMaxAge {
		return nil, fmt.Errorf("region-state max age %s is outside %s..%s", c.MaxAge, MinMaxAge, MaxMaxAge)
	}
	if c.Interval <= 0 || c.Interval > DefaultInterval {
		c.Interval = DefaultInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	w := &Watcher{c: c, now: time.Now}
	w.m = newMetrics(w)
	return w, nil
}

// Current is the document in force (nil before any) and whether it is
// fresh: its Created time within MaxAge of now. A consumer treats every
// signal as unknown unless fresh is true.
func (w *Watcher) Current() (s *regionstate.State, fresh bool) {
	s = w.cur.Load()
	if s == nil {
		return nil, false
	}
	age := w.now().Sub(s.Created)
	return s, age <= w.c.MaxAge && age >= -w.c.MaxAge
}

// MaxAge is the configured bound.
func (w *Watcher) MaxAge() time.Duration { return w.c.MaxAge }

// LoadState applies the persisted last good document, so the signals
// survive a restart (as stale ones, once older than MaxAge). A missing file
// is not an error; a bad one is counted, reported and left alone.
func (w *Watcher) LoadState() error {
	if w.c.StatePath == "" {
		return nil
	}
	data, err := os.ReadFile(w.c.StatePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.reject(w.c.StatePath, "read", "", err)
		return fmt.Errorf("region state %s: %w", w.c.StatePath, err)
	}
	s, err := regionstate.Parse(data, w.c.PublicKey)
	if err != nil {
		w.reject(w.c.StatePath, reasonOf(err), "", err)
		return fmt.Errorf("region state %s: %w", w.c.StatePath, err)
	}
	if cur := w.cur.Load(); cur == nil || cur.Version.Less(s.Version) {
		w.apply(s, "state", time.Time{})
	}
	w.last = data
	return nil
}

// Run polls the file until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.c.Interval)
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
	path := w.c.Path
	info, err := os.Stat(path)
	if err != nil {
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.c.Logger.Warn("region-state file unavailable; keeping the current document", "path", path, "err", err)
		}
		return
	}
	if !sameStamp(w.seen, info) {
		w.seen, w.seenAt = info, w.now()
	} else if w.settled {
		return
	}
	readAt := time.Now()
	w.settled = readAt.Sub(info.ModTime()) > racyWindow || readAt.Sub(w.seenAt) > racyWindow
	if info.Size() > regionstate.MaxFileBytes {
		w.settled = true // not read; its size changes when it is replaced
		w.reject(path, "too_large", "", fmt.Errorf("%d bytes is over the %d limit", info.Size(), regionstate.MaxFileBytes))
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		w.seen = nil // try again next time
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.reject(path, "read", "", err)
		}
		return
	}
	w.lastErr = ""
	if bytes.Equal(data, w.last) {
		return // unchanged (read again because of the racy window, or the persisted copy)
	}
	w.last = data
	s, err := regionstate.Parse(data, w.c.PublicKey)
	if err != nil {
		w.reject(path, reasonOf(err), "", err)
		return
	}
	if cur := w.cur.Load(); cur != nil && !cur.Version.Less(s.Version) {
		w.reject(path, "stale", s.Version.String(), fmt.Errorf("version %s is not above the current %s", s.Version, cur.Version))
		return
	}
	w.apply(s, path, readAt)
	if w.c.StatePath != "" {
		err := os.MkdirAll(filepath.Dir(w.c.StatePath), 0o755)
		if err == nil {
			err = envelope.WriteFileAtomic(w.c.StatePath, data, 0o644)
		}
		if err != nil {
			w.c.Logger.Error("cannot persist the region-state document", "path", w.c.StatePath, "err", err)
		}
	}
}

func (w *Watcher) apply(s *regionstate.State, from string, readAt time.Time) {
	w.cur.Store(s)
	at := w.now()
	w.applied.Store(&at)
	w.m.version.WithLabelValues("epoch").Set(float64(s.Version.Epoch))
	w.m.version.WithLabelValues("sequence").Set(float64(s.Version.Sequence))
	args := []any{"version", s.Version.String(), "created", s.Created, "regions", len(s.Regions), "platforms", len(s.Platforms), "from", from}
	if !readAt.IsZero() {
		args = append(args, "took", time.Since(readAt).Round(time.Microsecond))
	}
	w.c.Logger.Info("region state applied", args...)
	if w.c.OnApply != nil {
		w.c.OnApply(s)
	}
}

func (w *Watcher) reject(path, reason, version string, err error) {
	w.m.rejected.WithLabelValues(reason).Inc()
	cur := "none"
	if s := w.cur.Load(); s != nil {
		cur = s.Version.String()
	}
	w.c.Logger.Warn("region-state document refused; keeping the current one", "file", path, "reason", reason, "current", cur, "err", err)
	w.mu.Lock()
	w.refusal = &Refusal{Version: version, Reason: reason, Error: err.Error(), File: path, At: w.now()}
	w.mu.Unlock()
}

func sameStamp(a, b os.FileInfo) bool {
	return a != nil && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}

// Reasons a document is refused with (the reason label).
var Reasons = []string{"read", "too_large", "malformed", "format", "key_id", "signature", "digest", "invalid", "stale"}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, envelope.ErrFormat):
		return "format"
	case errors.Is(err, envelope.ErrKeyID):
		return "key_id"
	case errors.Is(err, envelope.ErrSignature):
		return "signature"
	case errors.Is(err, envelope.ErrDigest):
		return "digest"
	case errors.Is(err, regionstate.ErrInvalid):
		return "invalid"
	default:
		return "malformed"
	}
}
