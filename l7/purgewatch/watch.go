// Package purgewatch applies the cache purge document (format/purge) to a
// proxy's response cache: it watches one signed file with the generic
// l7/docwatch runtime (a poll every 250 ms, never an equal or lower
// version, the last good file kept and persisted) and, for each document
// that goes in force, removes the objects each new rule matches that were
// fetched before the rule's time (or before the proxy saw the rule, when
// that is later: clock skew). The store keeps each purge's test for a
// while, so a response fetched before a purge but stored after it is
// refused too. Rules are applied once, by id: a rule at or below the
// highest id applied is not run again. A gap in ids (rules that left the
// document before this proxy saw them) removes everything fetched before
// the oldest rule listed.
package purgewatch

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/purge"
	"github.com/rampart-edge/rampart/l7/cache"
	"github.com/rampart-edge/rampart/l7/docwatch"
)

// Interval is the poll period: a purge is in force within it (plus the
// removal's own time).
const Interval = 250 * time.Millisecond

// Config of a Watcher.
type Config struct {
	Path      string // the signed purge file
	StatePath string // where the last good document is kept ("": not kept)
	PublicKey ed25519.PublicKey
	// Store returns the cache store to purge (nil: none yet, the rules
	// are remembered as applied: a store made later holds nothing older).
	Store    func() *cache.Store
	Interval time.Duration // default and at most Interval
	Logger   *slog.Logger
	// OnApply, when set, hears each applied rule and how many objects it removed.
	OnApply func(r purge.Rule, removed int)
	// OnMissed, when set, hears a gap in rule ids (rules from..to left the
	// document unseen) and how many objects that removed.
	OnMissed func(from, to uint64, removed int)
}

// Watcher keeps the purge document in force and applies its rules.
type Watcher struct {
	c  Config
	dw *docwatch.Watcher[*purge.Document]

	mu   sync.Mutex
	last uint64 // highest rule id applied
}

// New checks c and makes a Watcher.
func New(c Config) (*Watcher, error) {
	if c.Path == "" {
		return nil, errors.New("purge watcher: no file")
	}
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("purge watcher: public key is %d bytes, want %d", len(c.PublicKey), ed25519.PublicKeySize)
	}
	if c.Store == nil {
		return nil, errors.New("purge watcher: no cache store")
	}
	if c.Interval <= 0 || c.Interval > Interval {
		c.Interval = Interval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	w := &Watcher{c: c}
	pub := c.PublicKey
	w.dw = &docwatch.Watcher[*purge.Document]{
		Name: "purge document", Path: c.Path, StatePath: c.StatePath, MaxBytes: purge.MaxFileBytes,
		Interval: c.Interval, Log: c.Logger,
		Open: func(_ *purge.Document, data []byte) (*purge.Document, envelope.Version, error) {
			d, err := purge.Parse(data, pub)
			if err != nil {
				return nil, envelope.Version{}, err
			}
			return d, d.Version, nil
		},
		Apply: func(d *purge.Document, _ envelope.Version) error { w.apply(d); return nil },
		Reason: func(err error) string {
			if errors.Is(err, purge.ErrInvalid) {
				return "invalid"
			}
			return ""
		},
	}
	return w, nil
}

// LoadState applies the persisted last good document.
func (w *Watcher) LoadState() error { return w.dw.LoadState() }

// Run polls the file until ctx ends.
func (w *Watcher) Run(ctx context.Context) error { return w.dw.Run(ctx) }

// Scan looks at the file once.
func (w *Watcher) Scan() { w.dw.Scan() }

// Current is the version in force (zero before any) and the highest rule id applied.
func (w *Watcher) Current() (envelope.Version, uint64) {
	_, v, _ := w.dw.Current()
	w.mu.Lock()
	defer w.mu.Unlock()
	return v, w.last
}

// Refusals counts refused files by reason.
func (w *Watcher) Refusals() map[string]uint64 { return w.dw.Refusals() }

func (w *Watcher) apply(d *purge.Document) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.c.Store()
	seen := time.Now()
	if len(d.Rules) > 0 && d.Rules[0].ID > w.last+1 {
		// Rules w.last+1 .. first-1 left the document before this proxy
		// saw them (it was away past the control plane's window). They
		// were all made before the oldest rule listed, so everything
		// fetched before that rule goes.
		first := d.Rules[0]
		at := first.At()
		n := 0
		if st != nil {
			n = st.Purge(at, func(o *cache.Object) bool { return o.FetchedAt().Before(at) })
		}
		if w.last > 0 || n > 0 { // a fresh proxy (nothing applied yet) holds nothing that old, as a rule
			w.c.Logger.Warn("cache purge rules missed: removed everything fetched before the oldest rule listed",
				"missed_from", w.last+1, "missed_to", first.ID-1, "before", at, "removed", n, "version", d.Version.String())
		}
		if w.c.OnMissed != nil {
			w.c.OnMissed(w.last+1, first.ID-1, n)
		}
	}
	for _, r := range d.Rules {
		if r.ID <= w.last {
			continue
		}
		n := 0
		if st != nil {
			m := matcherAt(r, seen)
			n = st.Purge(m.at, m.match)
		}
		w.last = r.ID
		w.c.Logger.Info("cache purge applied", "rule", r.ID, "route", r.Route, "prefix", r.Prefix,
			"surrogate_key", r.SurrogateKey, "removed", n, "version", d.Version.String())
		if w.c.OnApply != nil {
			w.c.OnApply(r, n)
		}
	}
}

type mark struct {
	at    time.Time
	match func(o *cache.Object) bool
}

// matcherAt is the rule's test as this proxy applies it, having seen the
// rule at seen: the later of the rule's time (the control plane's clock)
// and seen (ours) bounds what it removes, so a node whose clock runs
// ahead of the control plane's still drops what it fetched before the
// purge. The cost is that what was fetched between the two goes too.
func matcherAt(r purge.Rule, seen time.Time) mark {
	if at := r.At(); at.After(seen) {
		seen = at
	}
	at := seen
	return mark{at: at, match: func(o *cache.Object) bool { return selects(r, o) && o.FetchedAt().Before(at) }}
}

// Matcher is the rule's test of an object: fetched before the rule's time
// and matching every selector the rule sets.
func Matcher(r purge.Rule) func(o *cache.Object) bool {
	at := r.At()
	return func(o *cache.Object) bool { return o.FetchedAt().Before(at) && selects(r, o) }
}

func selects(r purge.Rule, o *cache.Object) bool {
	return (r.Route == "" || o.Route == r.Route) &&
		(r.Prefix == "" || strings.HasPrefix(o.Target, r.Prefix)) &&
		(r.SurrogateKey == "" || slices.Contains(o.Surrogate, r.SurrogateKey))
}
