// Package regionwatch keeps a proxy's (or an agent's) current region-state
// document (format/regionstate) with the generic l7/docwatch runtime: it
// polls one signed file, applies a newer version within a poll period,
// never goes back to an equal or lower version, keeps the last good
// document when a file is bad (counting the refusal by reason), persists
// the last good bytes, and tells its consumer whether the document is
// fresh. A stale or absent document means every signal is unknown.
package regionwatch

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/docwatch"
)

// Defaults and bounds of Config.
const (
	DefaultMaxAge   = 30 * time.Second
	MinMaxAge       = time.Second
	MaxMaxAge       = 24 * time.Hour
	DefaultInterval = 250 * time.Millisecond // also the longest allowed
)

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

// Watcher keeps the current region-state document of one file: a
// docwatch.Watcher of regionstate documents, plus freshness, metrics and
// status. Current and Status are safe from any goroutine; Run and
// LoadState are not concurrent.
type Watcher struct {
	c       Config
	m       *metrics
	now     func() time.Time
	dw      *docwatch.Watcher[*regionstate.State]
	applied atomic.Pointer[time.Time] // when the document in force was applied
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
	pub := c.PublicKey
	w.dw = &docwatch.Watcher[*regionstate.State]{
		Name: "region state", Path: c.Path, StatePath: c.StatePath, MaxBytes: regionstate.MaxFileBytes,
		Interval: c.Interval, Log: c.Logger,
		Open: func(_ *regionstate.State, data []byte) (*regionstate.State, envelope.Version, error) {
			s, err := regionstate.Parse(data, pub)
			if err != nil {
				return nil, envelope.Version{}, err
			}
			return s, s.Version, nil
		},
		Apply: func(s *regionstate.State, _ envelope.Version) error { w.apply(s); return nil },
		Reason: func(err error) string {
			if errors.Is(err, regionstate.ErrInvalid) {
				return "invalid"
			}
			return ""
		},
		OnReject: func(r docwatch.Refusal) { w.m.rejected.WithLabelValues(r.Reason).Inc() },
	}
	return w, nil
}

// Current is the document in force (nil before any) and whether it is
// fresh: its Created time within MaxAge of now. A consumer treats every
// signal as unknown unless fresh is true.
func (w *Watcher) Current() (s *regionstate.State, fresh bool) {
	s, _, ok := w.dw.Current()
	if !ok || s == nil {
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
func (w *Watcher) LoadState() error { return w.dw.LoadState() }

// Run polls the file until ctx ends.
func (w *Watcher) Run(ctx context.Context) error { return w.dw.Run(ctx) }

// poll looks at the file once.
func (w *Watcher) poll() { w.dw.Scan() }

// apply runs as the document goes in force (docwatch's Apply hook).
func (w *Watcher) apply(s *regionstate.State) {
	at := w.now()
	w.applied.Store(&at)
	w.m.version.WithLabelValues("epoch").Set(float64(s.Version.Epoch))
	w.m.version.WithLabelValues("sequence").Set(float64(s.Version.Sequence))
	w.c.Logger.Info("region state applied", "version", s.Version.String(), "created", s.Created,
		"regions", len(s.Regions), "platforms", len(s.Platforms))
	if w.c.OnApply != nil {
		w.c.OnApply(s)
	}
}

// Reasons a document is refused with (the reason label).
var Reasons = []string{"read", "too_large", "malformed", "format", "key_id", "signature", "digest", "invalid", "stale", "older_epoch"}
