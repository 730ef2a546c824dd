// Package h1 is rampart's HTTP/1.1 server. It parses strictly (RFC 9112):
// ambiguous framing, obsolete line folding, malformed chunking and control
// bytes are refused with a 4xx and the connection closed, never passed on.
// It serves an http.Handler, reusing one request, header map and response
// writer per connection, with no goroutine per request and no reader
// goroutine unless a handler waits for the client to go away.
package h1

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/connset"
)

// Server serves HTTP/1.1 on connections handed to ServeConn.
type Server struct {
	Handler http.Handler
	// MaxHeaderBytes bounds the request line and header section together.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds reading a request head once its first byte
	// arrived; IdleTimeout bounds the wait for the next request.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// BodyReadTimeout bounds every wait for request body bytes (0: none).
	// A read that times out fails with an error matching
	// os.ErrDeadlineExceeded and the connection closes after the
	// response. A body the handler left unread is drained after the
	// response, up to 256 KiB within 1 s (or BodyReadTimeout when
	// shorter); otherwise the connection closes.
	BodyReadTimeout time.Duration
	// BodyTimedOut, when set, is told about every request whose body
	// stalled past BodyReadTimeout or the drain's time budget.
	BodyTimedOut func()
	// Logger gets handler panics; nil means slog.Default().
	Logger *slog.Logger
	// Rejected, when set, is told about every request refused by the
	// parser: the client's address, the status sent and why.
	Rejected func(remote string, status int, reason string)
	// BaseContext is the parent of every request context; nil: Background.
	BaseContext context.Context

	conns    connset.Set[*conn]
	shutting atomic.Bool
}

// bufSize is the read buffer per connection: no single header line may be
// longer (nginx's large_client_header_buffers default is 8 KiB).
const bufSize = 16 << 10

// ServeConn serves one connection until the client closes it, an error or
// a timeout ends it, or the server shuts down. It closes the connection.
func (s *Server) ServeConn(nc net.Conn) {
	c := newConn(s, nc)
	s.conns.Add(c)
	defer s.conns.Remove(c)
	c.serve()
}

// Shutdown closes idle connections at once and every other one after its
// current response (which says Connection: close), then waits for them
// until ctx ends, when it closes what is left and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.conns.Each((*conn).interruptIfIdle)
	return s.conns.Wait(ctx, func(c *conn) { _ = c.nc.Close() })
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func (s *Server) rejected(remote string, status int, reason string) {
	if s.Rejected != nil {
		s.Rejected(remote, status, reason)
	}
}
