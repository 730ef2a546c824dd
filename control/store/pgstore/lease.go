package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rampart-edge/rampart/control/store"
)

// leaseState is this instance's view of the lease. validUntil is the time
// a renewal was sent plus the TTL less a tenth for clock-rate drift: the
// database's expiry is never earlier, so this instance stops writing
// before another may start.
type leaseState struct {
	mu         sync.Mutex
	leader     bool
	epoch      uint64
	validUntil time.Time
	holder     string // holder as last read from the database
	dbEpoch    uint64
}

func (l *leaseState) valid() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.leader && time.Now().Before(l.validUntil) {
		return l.epoch, true
	}
	return l.epoch, false
}

// lost marks the lease lost (for epoch, or whatever it is with 0).
func (l *leaseState) lost(epoch uint64) {
	l.mu.Lock()
	if epoch == 0 || l.epoch == epoch {
		l.leader = false
	}
	l.mu.Unlock()
}

// Leader reports the lease as this instance sees it.
func (s *Store) Leader() store.Leadership {
	epoch, ok := s.lease.valid()
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	ld := store.Leadership{Leader: ok && !s.closed.Load(), Epoch: s.lease.dbEpoch, Holder: s.lease.holder, Instance: s.opt.Instance}
	if ld.Leader {
		ld.Epoch, ld.Holder = epoch, s.opt.Instance
	}
	return ld
}

func (s *Store) keepLease(ctx context.Context) {
	every := s.opt.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	prune := time.Now()
	for {
		if !s.suspend.Load() && !s.closed.Load() {
			s.tickLease(ctx)
			if _, ok := s.lease.valid(); ok && time.Since(prune) > time.Minute {
				prune = time.Now()
				s.pruneOutbox(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tickLease renews a held lease or tries to take over an expired one.
func (s *Store) tickLease(ctx context.Context) {
	ttl := s.opt.LeaseTTL.Milliseconds()
	sent := time.Now()
	s.lease.mu.Lock()
	leader, epoch := s.lease.leader, s.lease.epoch
	s.lease.mu.Unlock()
	// An answer that comes late still counts (validity runs from sent):
	// give a busy server half a TTL rather than one renewal period.
	cctx, cancel := context.WithTimeout(ctx, s.opt.LeaseTTL/2)
	defer cancel()
	if leader {
		tag, err := s.pool.Exec(cctx, `UPDATE lease SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
			WHERE id = 1 AND holder = $1 AND epoch = $2 AND expires_at > clock_timestamp()`, s.opt.Instance, int64(epoch), ttl)
		switch {
		case err != nil:
			s.log.Warn("lease renewal failed; writes stop when the lease lapses", "err", err)
		case tag.RowsAffected() == 1:
			s.setLease(true, epoch, sent, s.opt.Instance)
		default:
			s.lease.lost(epoch)
			s.log.Error("lease lost: another instance holds it or it expired; writes refused", "epoch", epoch)
		}
		return
	}
	// Take an expired lease (epoch+1), or adopt an unexpired one the
	// database already names this instance the holder of: a takeover or
	// renewal the server applied but whose answer was lost (the deadline
	// below passed on a busy box, the connection broke). Its epoch has
	// held without a gap, so it is kept; taking it again only after it
	// lapsed would move the epoch once more for nothing.
	var newEpoch int64
	err := s.pool.QueryRow(cctx, `UPDATE lease l SET holder = $1,
			epoch = CASE WHEN l.holder = $1 AND l.expires_at > c.now THEN l.epoch ELSE l.epoch + 1 END,
			expires_at = c.now + $2 * interval '1 millisecond'
		FROM (SELECT clock_timestamp() AS now) c
		WHERE l.id = 1 AND (l.expires_at < c.now OR l.holder = $1)
		RETURNING l.epoch`, s.opt.Instance, ttl).Scan(&newEpoch)
	switch {
	case err == nil:
		s.setLease(true, uint64(newEpoch), sent, s.opt.Instance)
		s.log.Info("lease taken: this instance writes now", "epoch", newEpoch)
	case errors.Is(err, pgx.ErrNoRows):
		var holder string
		var e int64
		if err := s.pool.QueryRow(cctx, "SELECT holder, epoch FROM lease WHERE id = 1").Scan(&holder, &e); err == nil {
			s.lease.mu.Lock()
			s.lease.holder, s.lease.dbEpoch = holder, uint64(e)
			s.lease.mu.Unlock()
		}
	default:
		s.log.Warn("lease takeover attempt failed", "err", err)
	}
}

func (s *Store) setLease(leader bool, epoch uint64, sent time.Time, holder string) {
	s.lease.mu.Lock()
	s.lease.leader, s.lease.epoch, s.lease.holder, s.lease.dbEpoch = leader, epoch, holder, epoch
	s.lease.validUntil = sent.Add(s.opt.LeaseTTL - s.opt.LeaseTTL/10)
	s.lease.mu.Unlock()
}

// release gives the lease up so another instance need not wait for it to
// expire.
func (s *Store) release() {
	epoch, ok := s.lease.valid()
	s.lease.lost(0)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "UPDATE lease SET expires_at = '-infinity' WHERE id = 1 AND holder = $1 AND epoch = $2",
		s.opt.Instance, int64(epoch)); err != nil {
		s.log.Warn("lease release failed; another instance takes over when it expires", "err", err)
	}
}

func (s *Store) pruneOutbox(ctx context.Context) {
	if _, err := s.pool.Exec(ctx, "DELETE FROM events WHERE at < clock_timestamp() - interval '1 hour'"); err != nil {
		s.log.Warn("outbox prune failed", "err", err)
	}
}
