package listener

import (
	"crypto/tls"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/handoff"
)

// Env is what listeners serve with: the proxy's side of each connection.
type Env struct {
	// Handler returns the request path for requests on the named listener.
	Handler func(listener string) http.Handler
	// Certificate picks the certificate for a TLS handshake on the named
	// listener (by SNI, from the active snapshot).
	Certificate func(listener string, hello *tls.ClientHelloInfo) (*tls.Certificate, error)
	// Refused counts and logs a request a protocol server refused before
	// any handler ran: the HTTP/1.1 parser, or x/net/http2's own 431 and
	// 400. reason is a rampart_bad_requests_total reason label.
	Refused  func(remote, proto string, status int, reason, detail string)
	Metrics  *Metrics
	Log      *slog.Logger
	ErrorLog *log.Logger // for net/http's server (HTTP/2)
	// Sockets, when set, hands out the listening sockets (for a graceful
	// re-exec: inherited from the previous process, else bound and kept for
	// the next); nil binds them directly.
	Sockets SocketSource
	// Tickets, when set, gives the TLS session ticket keys (shared by the
	// node's proxies, rotating); nil leaves Go's per-config random keys.
	Tickets TicketSource
}

// SocketSource gives a listener its sockets. name is the listener's name and
// key its address as configured (port 0 stays 0); together they identify
// the socket across processes. addr is the address to bind when nothing is
// inherited (for HTTP/3's UDP side, the TCP side's bound address).
type SocketSource interface {
	Listen(name, key, addr string) (net.Listener, error)
	ListenPacket(name, key, addr string) (net.PacketConn, error)
}

// Metrics are the listeners' series.
type Metrics struct {
	ConnRejected *prometheus.CounterVec // rampart_connections_rejected_total{listener, reason}
	ConnAccepted *prometheus.CounterVec // rampart_connections_accepted_total{listener, protocol}
	H2Abuse      *prometheus.CounterVec // rampart_h2_connections_closed_total{reason}
	BodyTimeouts *prometheus.CounterVec // rampart_request_body_timeouts_total{protocol}
	Handshakes   *prometheus.CounterVec // rampart_tls_handshakes_total{listener, transport, resumed}
	h3           *h3Collector           // rampart_h3_udp_receive_buffer_bytes{listener}
}

// NewMetrics makes the listener series and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ConnRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_connections_rejected_total", Help: "Client connections closed at accept or handshake, by listener and reason.",
		}, []string{"listener", "reason"}),
		ConnAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_connections_accepted_total", Help: "Client connections accepted, by listener and protocol.",
		}, []string{"listener", "protocol"}),
		H2Abuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_h2_connections_closed_total", Help: "HTTP/2 connections closed for abuse, by reason (resets, continuation).",
		}, []string{"reason"}),
		BodyTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_request_body_timeouts_total", Help: "Requests whose body stalled past the listener's request_body_timeout_ms (or, on http1, an unread body not drained within 1 s after the response), by protocol.",
		}, []string{"protocol"}),
		Handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rampart_tls_handshakes_total", Help: "Completed TLS handshakes, by listener, transport (tcp, quic) and whether a session ticket resumed them.",
		}, []string{"listener", "transport", "resumed"}),
		h3: &h3Collector{byName: map[string]*h3server{}},
	}
	reg.MustRegister(m.ConnRejected, m.ConnAccepted, m.H2Abuse, m.BodyTimeouts, m.Handshakes, m.h3)
	return m
}

// Address is the listener's address as configured (port 0 stays 0).
func (l *Listener) Address() string { return l.address }

// Sockets duplicates the listener's listening sockets (TCP, and UDP while
// HTTP/3 accepts) for the node agent's socket hand-off.
func (l *Listener) Sockets() []handoff.Socket {
	var out []handoff.Socket
	if tl, ok := l.ln.(*net.TCPListener); ok {
		if f, err := tl.File(); err == nil {
			out = append(out, handoff.Socket{Listener: l.name, Network: "tcp", Addr: tl.Addr().String(), File: f})
		}
	}
	if u := l.H3Socket(); u != nil {
		if f, err := u.File(); err == nil {
			out = append(out, handoff.Socket{Listener: l.name, Network: "udp", Addr: u.LocalAddr().String(), File: f})
		}
	}
	return out
}

// H3Socket is the listener's HTTP/3 socket while it accepts connections
// (nil otherwise).
func (l *Listener) H3Socket() *net.UDPConn {
	h := l.h3
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ln == nil || h.released {
		return nil
	}
	return h.udp
}

// H3ReceiveBuffer is the HTTP/3 socket's receive buffer as the kernel
// reports it (0 without HTTP/3).
func (l *Listener) H3ReceiveBuffer() int {
	if l.h3 == nil {
		return 0
	}
	return l.h3.rcvBuf
}

// H3Conns is the QUIC connections open or handshaking (0 without HTTP/3).
func (l *Listener) H3Conns() int64 {
	if l.h3 == nil {
		return 0
	}
	return l.h3.conns.Load()
}

// Reasons of rampart_bad_requests_total shared with the proxy's own
// request checks.
const (
	badMethod = "method"
	badHeader = "header"
	badHost   = "host"
	badTarget = "target"
)

// parserReason names, for rampart_bad_requests_total{reason}, why the
// HTTP/1.1 parser refused a request, from its status and message (the
// message may quote the offending bytes, so it is never a label itself).
func parserReason(status int, msg string) string {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return "head_too_large"
	case http.StatusHTTPVersionNotSupported:
		return "version"
	case http.StatusExpectationFailed:
		return "expect"
	case http.StatusNotImplemented:
		return "transfer_encoding"
	case http.StatusRequestTimeout:
		return "timeout"
	}
	switch {
	case strings.HasPrefix(msg, "malformed request line"):
		return "request_line"
	case strings.HasPrefix(msg, "invalid method"):
		return badMethod
	case strings.Contains(msg, "request target"), strings.Contains(msg, "in path"), strings.HasPrefix(msg, "asterisk-form"):
		return badTarget
	case strings.Contains(msg, "Host field"):
		return badHost
	case strings.Contains(msg, "Content-Length"), strings.Contains(msg, "Transfer-Encoding"):
		return "framing"
	case strings.Contains(msg, "header"), strings.Contains(msg, "line folding"), strings.Contains(msg, "in the value of"):
		return badHeader
	}
	return "malformed"
}
