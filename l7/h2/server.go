// Package h2 is rampart's HTTP/2 server (RFC 9113) on x/net/http2's Framer
// and hpack. One goroutine per connection reads frames; stream handlers run
// on a small set of reused worker goroutines per connection (never more
// than MaxConcurrentStreams); frames of every stream go out through one
// buffer, written in one Write when the connection has nothing more to do.
// It serves a plain http.Handler, like package h1, so the proxy's handler
// serves both. The abuse bounds (rapid reset, CONTINUATION floods, HPACK
// bombs, SETTINGS/PING/PRIORITY/empty-frame/WINDOW_UPDATE floods, zero
// window stalls) are part of the connection, not a wrapper around it.
package h2

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/connset"
)

// Server serves HTTP/2 on connections handed to ServeConn (after TLS with
// ALPN h2, or prior-knowledge cleartext).
type Server struct {
	Handler http.Handler

	// MaxConcurrentStreams bounds the streams a client may have open;
	// HEADERS over it are refused with REFUSED_STREAM. Default 250.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's decoded header list (names,
	// values and 32 bytes a field, RFC 9113 §6.5.2); over it the request
	// is answered 431. Default 1 MiB.
	MaxHeaderListSize uint32
	// StreamWindow and ConnWindow are the receive windows offered for a
	// stream's request body and for the whole connection. Defaults 256 KiB
	// and 1 MiB.
	StreamWindow int32
	ConnWindow   int32

	// ReadHeaderTimeout bounds the client preface with its SETTINGS and the
	// time from a header block's first frame to its last. 0: 10 s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes (with GOAWAY) a connection with no open stream
	// for that long. 0: none.
	IdleTimeout time.Duration
	// StallTimeout bounds how long a response may wait for the client to
	// open its flow-control window (or read what is written); past it the
	// connection closes (zero-window stall). 0: 30 s.
	StallTimeout time.Duration

	// MaxResetsPerSecond bounds RST_STREAM frames from a client, sustained
	// (token bucket, burst of the same size): rapid reset, CVE-2023-44487.
	// The streams a client makes the server reset (refused over the stream
	// limit, malformed, frames on closed streams) have a bucket of the
	// same rate. Default 200.
	MaxResetsPerSecond int
	// MaxControlPerSecond bounds, each in its own bucket, PING, SETTINGS,
	// PRIORITY, empty DATA/HEADERS/CONTINUATION frames and WINDOW_UPDATE
	// frames of less than 1 KiB. Default 1000.
	MaxControlPerSecond int
	// MaxContinuations bounds the CONTINUATION frames of one header block.
	// Default 128.
	MaxContinuations int

	// Abuse, when set, is told why a connection was closed for abuse:
	// resets, stream_errors, continuation, header_block, settings, ping, priority,
	// empty_frames, window_update, control_queue, zero_window.
	Abuse func(remote, reason string)
	// Rejected, when set, is told about every request refused before its
	// handler ran with a status (431, 400): client address, status, reason.
	Rejected func(remote string, status int, reason string)
	// Logger gets handler panics; nil: slog.Default().
	Logger *slog.Logger
	// BaseContext is the parent of every request context; nil: Background.
	BaseContext context.Context

	workerIdle time.Duration // tests: how long an idle worker stays (0: workerIdle)

	conns    connset.Set[*conn]
	shutting atomic.Bool
}

// Defaults of the zero-valued settings.
const (
	DefaultMaxConcurrentStreams = 250
	DefaultMaxHeaderListSize    = 1 << 20
	DefaultStreamWindow         = 256 << 10
	DefaultConnWindow           = 1 << 20
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultStallTimeout         = 30 * time.Second
	DefaultMaxResetsPerSecond   = 200
	DefaultMaxControlPerSecond  = 1000
	DefaultMaxContinuations     = 128
	// maxQueuedControl bounds control replies (SETTINGS and PING acks,
	// RST_STREAM) queued while the client does not read (x/net: 10000).
	maxQueuedControl = 10000
)

type settings struct {
	maxStreams   uint32
	maxHeader    uint32
	streamWindow int32
	connWindow   int32
	readHeader   time.Duration
	idle         time.Duration
	stall        time.Duration
	resets       int
	control      int
	conts        int
}

func (s *Server) settings() settings {
	st := settings{maxStreams: s.MaxConcurrentStreams, maxHeader: s.MaxHeaderListSize,
		streamWindow: s.StreamWindow, connWindow: s.ConnWindow, readHeader: s.ReadHeaderTimeout,
		idle: s.IdleTimeout, stall: s.StallTimeout, resets: s.MaxResetsPerSecond,
		control: s.MaxControlPerSecond, conts: s.MaxContinuations}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if st.maxStreams == 0 {
		st.maxStreams = DefaultMaxConcurrentStreams
	}
	if st.maxHeader == 0 {
		st.maxHeader = DefaultMaxHeaderListSize
	}
	if st.streamWindow <= 0 {
		st.streamWindow = DefaultStreamWindow
	}
	if st.connWindow < st.streamWindow {
		st.connWindow = max(st.streamWindow, DefaultConnWindow)
	}
	if st.readHeader <= 0 {
		st.readHeader = DefaultReadHeaderTimeout
	}
	if st.stall <= 0 {
		st.stall = DefaultStallTimeout
	}
	def(&st.resets, DefaultMaxResetsPerSecond)
	def(&st.control, DefaultMaxControlPerSecond)
	def(&st.conts, DefaultMaxContinuations)
	return st
}

// ServeConn serves one connection (the client preface is read here) until
// the client goes away, an error or timeout ends it, or the server shuts
// down; it returns once every handler of the connection has returned. It
// closes the connection.
func (s *Server) ServeConn(nc net.Conn) {
	c := newConn(s, nc)
	s.conns.Add(c)
	defer s.conns.Remove(c)
	if s.shutting.Load() {
		c.shutdown()
	}
	c.serve()
}

// Shutdown sends GOAWAY on every connection (a connection that has not
// sent a request yet gets FreshConnGrace for its first ones), lets open
// streams finish, and waits for the connections to close until ctx ends,
// when it closes what is left and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.conns.Each((*conn).shutdown)
	return s.conns.Wait(ctx, func(c *conn) { _ = c.nc.Close() })
}

// FreshConnGrace is how long a connection that has sent no request when
// Shutdown began gets to send its first ones before its GOAWAY.
const FreshConnGrace = 2 * time.Second

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}
