package proxy

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// accessEntry is one request's log line, filled on the request path and
// encoded on the log writer's goroutine.
type accessEntry struct {
	start    time.Time
	dur      time.Duration
	reqID    string
	remote   string
	proto    string
	method   string
	host     string
	path     string
	route    string
	revision string
	upstream string
	status   int
	bytes    int64
	err      string
}

// accessLog hands entries to a writer goroutine through a bounded queue;
// when the writer falls behind, entries are dropped and counted, never
// waited for.
type accessLog struct {
	ch      chan accessEntry
	dropped prometheus.Counter
	done    chan struct{}
}

const accessLogQueue = 8192

// newAccessLog starts the writer; w nil means access logging is off.
func newAccessLog(w io.Writer, dropped prometheus.Counter) *accessLog {
	if w == nil {
		return nil
	}
	l := &accessLog{ch: make(chan accessEntry, accessLogQueue), dropped: dropped, done: make(chan struct{})}
	go l.run(slog.New(slog.NewJSONHandler(w, nil)))
	return l
}

func (l *accessLog) write(e *accessEntry) {
	if l == nil {
		return
	}
	select {
	case l.ch <- *e:
	default:
		l.dropped.Inc()
	}
}

func (l *accessLog) run(log *slog.Logger) {
	defer close(l.done)
	ctx := context.Background()
	for e := range l.ch {
		attrs := []slog.Attr{
			slog.String("request_id", e.reqID),
			slog.String("remote", e.remote),
			slog.String("proto", e.proto),
			slog.String("method", e.method),
			slog.String("host", e.host),
			slog.String("path", e.path),
			slog.Int("status", e.status),
			slog.Int64("bytes", e.bytes),
			slog.Float64("duration_ms", float64(e.dur.Microseconds())/1000),
		}
		if e.route != "" {
			attrs = append(attrs, slog.String("route", e.route), slog.String("revision", e.revision))
		}
		if e.upstream != "" {
			attrs = append(attrs, slog.String("upstream", e.upstream))
		}
		if e.err != "" {
			attrs = append(attrs, slog.String("error", e.err))
		}
		r := slog.NewRecord(e.start, slog.LevelInfo, "access", 0)
		r.AddAttrs(attrs...)
		_ = log.Handler().Handle(ctx, r)
	}
}

// close flushes what is queued and stops the writer.
func (l *accessLog) close() {
	if l == nil {
		return
	}
	close(l.ch)
	<-l.done
}
