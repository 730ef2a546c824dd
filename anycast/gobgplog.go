package anycast

import (
	"context"
	"log/slog"
	"strings"

	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

// gobgpLog passes GoBGP's log lines to slog at Info and above.
type gobgpLog struct{ log *slog.Logger }

func (l *gobgpLog) emit(level slog.Level, msg string, f gobgplog.Fields) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	args := make([]any, 0, 2*len(f)+2)
	args = append(args, "component", "gobgp")
	for k, v := range f {
		args = append(args, k, v)
	}
	l.log.Log(context.Background(), level, "gobgp: "+msg, args...)
}

func (l *gobgpLog) Panic(msg string, f gobgplog.Fields) { l.emit(slog.LevelError, msg, f); panic(msg) }
func (l *gobgpLog) Fatal(msg string, f gobgplog.Fields) { l.emit(slog.LevelError, "fatal: "+msg, f) }
func (l *gobgpLog) Error(msg string, f gobgplog.Fields) { l.emit(slog.LevelError, msg, f) }
func (l *gobgpLog) Warn(msg string, f gobgplog.Fields) {
	if strings.HasPrefix(msg, "No matching path for withdraw") {
		return // paths our import policy refused being replaced by the peer: expected
	}
	l.emit(slog.LevelWarn, msg, f)
}
func (l *gobgpLog) Info(msg string, f gobgplog.Fields)  { l.emit(slog.LevelInfo, msg, f) }
func (l *gobgpLog) Debug(msg string, f gobgplog.Fields) {}

func (l *gobgpLog) SetLevel(gobgplog.LogLevel)  {}
func (l *gobgpLog) GetLevel() gobgplog.LogLevel { return gobgplog.InfoLevel }
