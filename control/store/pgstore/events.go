package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rampart-edge/rampart/control/model"
)

// listen follows the outbox: LISTEN rampart_events on a connection of its
// own, and a read of the outbox on every notification and at least every
// Poll, so events committed by other instances are published here too.
func (s *Store) listen(ctx context.Context) {
	for ctx.Err() == nil {
		conn, err := pgx.Connect(ctx, s.opt.DSN)
		if err == nil {
			_, err = conn.Exec(ctx, "LISTEN rampart_events")
		}
		if err != nil {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
			s.poll(ctx)
			sleep(ctx, s.opt.Poll)
			continue
		}
		for ctx.Err() == nil && !s.closed.Load() {
			wctx, cancel := context.WithTimeout(ctx, s.opt.Poll)
			_, werr := conn.WaitForNotification(wctx)
			cancel()
			s.poll(ctx)
			if werr != nil && wctx.Err() == nil && ctx.Err() == nil {
				break // the connection failed: reconnect
			}
		}
		_ = conn.Close(context.Background())
		if s.closed.Load() {
			return
		}
	}
}

// poll publishes outbox events newer than the last one published.
func (s *Store) poll(ctx context.Context) {
	if s.closed.Load() {
		return
	}
	s.mu.Lock()
	last := s.lastSeen
	s.mu.Unlock()
	rows, err := s.pool.Query(ctx, "SELECT id, epoch, kind, subject, at FROM events WHERE id > $1 ORDER BY id LIMIT 1000", last)
	if err != nil {
		return
	}
	var evs []model.Event
	for rows.Next() {
		var e model.Event
		var epoch int64
		if err := rows.Scan(&e.ID, &epoch, &e.Kind, &e.Subject, &e.At); err != nil {
			rows.Close()
			return
		}
		e.Epoch = uint64(epoch)
		evs = append(evs, e)
	}
	if rows.Err() == nil {
		s.deliver(evs)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
