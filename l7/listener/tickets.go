package listener

import (
	"crypto/tls"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// TicketSource gives TLS session ticket keys (l7/tickets.Source): the keys
// of one scope (a listener and transport) at a time, encrypting key first,
// and when they change next; Version changes when keys fetched earlier
// are out of date for another reason.
type TicketSource interface {
	Keys(scope string, now time.Time) ([][32]byte, time.Time, error)
	Version() uint64
}

// ticketRetry is how soon keys are fetched again after a failure (the
// keys in use stay meanwhile).
const ticketRetry = 10 * time.Second

// ticketKeeper keeps one tls.Config's ticket keys current. It is checked
// before each handshake; between rotations that is two atomic loads.
type ticketKeeper struct {
	src   TicketSource
	scope string
	log   *slog.Logger
	mu    sync.Mutex
	cfg   *tls.Config
	next  atomic.Int64 // unix nanoseconds of the next change
	ver   atomic.Uint64
	fails atomic.Uint64
}

func newTicketKeeper(src TicketSource, scope string, log *slog.Logger) *ticketKeeper {
	if src == nil {
		return nil
	}
	return &ticketKeeper{src: src, scope: scope, log: log}
}

// use makes cfg the config kept and gives it the keys now.
func (k *ticketKeeper) use(cfg *tls.Config) {
	if k == nil || cfg == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cfg = cfg
	k.apply(time.Now())
}

// check refreshes the keys when their period ended or the source changed.
func (k *ticketKeeper) check() {
	if k == nil {
		return
	}
	now := time.Now()
	if now.UnixNano() < k.next.Load() && k.src.Version() == k.ver.Load() {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.UnixNano() < k.next.Load() && k.src.Version() == k.ver.Load() {
		return
	}
	k.apply(now)
}

func (k *ticketKeeper) apply(now time.Time) {
	if k.cfg == nil {
		return
	}
	ver := k.src.Version()
	keys, next, err := k.src.Keys(k.scope, now)
	if err != nil || len(keys) == 0 {
		k.fails.Add(1)
		k.log.Error("TLS session ticket keys not refreshed; the keys in use stay", "scope", k.scope, "err", err)
		k.next.Store(now.Add(ticketRetry).UnixNano())
		k.ver.Store(ver)
		return
	}
	k.cfg.SetSessionTicketKeys(keys)
	k.next.Store(next.UnixNano())
	k.ver.Store(ver)
}
