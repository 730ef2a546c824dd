package listener

// HTTP/3: a TLS listener whose protocols include h3 also serves QUIC on a UDP
// socket bound to the same ip:port, with the same certificates and the same
// request path (Env.Handler) as its TCP side.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

const (
	// H3SocketBuffer is the receive and send buffer asked for the UDP
	// socket, as quic-go advises
	// (https://github.com/quic-go/quic-go/wiki/UDP-Buffer-Sizes).
	H3SocketBuffer = 7<<20 + 512<<10 // 7.5 MiB
	// Flow-control windows for request bodies, as on HTTP/2.
	h3StreamWindow = 256 << 10
	h3ConnWindow   = 1 << 20
	altSvcMaxAge   = 86400
)

var errH3Full = errors.New("listener is at max_connections")

// wantsH3 reports whether a listener config asks for HTTP/3.
func wantsH3(cfg snapshot.Listener) bool {
	return cfg.TLS != nil && slices.Contains(cfg.Protocols, "h3")
}

// h3server serves HTTP/3 for one listener. It owns the UDP socket and the
// QUIC transport on it. Its HTTP/3 servers come in generations, like the TCP
// side's: a settings change starts a new one for new connections and drains
// the old one (GOAWAY). When h3 is switched off the server stops accepting,
// drains, and then releases the socket; switched on again before that, it
// listens again on the same socket.
type h3server struct {
	l      *Listener
	udp    *net.UDPConn
	tr     *quic.Transport
	tls    *tls.Config
	rcvBuf int // SO_RCVBUF as the kernel reports it

	tickets *ticketKeeper // h.tls's session ticket keys; nil: Go's own

	conns atomic.Int64          // QUIC connections open or handshaking
	cur   atomic.Pointer[h3gen] // settings for new connections

	mu       sync.Mutex
	ln       *quic.Listener // nil while not accepting
	loopDone chan struct{}  // closed when ln's accept loop has returned
	gens     map[*h3gen]struct{}
	released bool           // transport and socket are closed
	serving  sync.WaitGroup // one per accepted connection
}

// h3gen is the HTTP/3 server and QUIC settings of one listener config.
type h3gen struct {
	key      string
	srv      *http3.Server
	quic     *quic.Config
	maxConns int64
}

// h3Key is what of a listener's config the HTTP/3 side depends on.
func h3Key(cfg snapshot.Listener) string {
	return fmt.Sprint(cfg.MaxHeaderBytes, cfg.ReadHeaderTimeoutMs, cfg.IdleTimeoutMs,
		cfg.MaxConnections, cfg.H2MaxConcurrentStreams, cfg.RequestBodyTimeoutMs)
}

// setH3 starts, updates or stops the listener's HTTP/3 server to match cfg.
// It is called with the proxy's mutex held (from listen and update).
func (l *Listener) setH3(cfg snapshot.Listener) error {
	if !wantsH3(cfg) {
		if l.h3 != nil {
			l.h3.stop()
		}
		return nil
	}
	if l.h3 != nil {
		ok, err := l.h3.apply(cfg)
		if ok || err != nil {
			return err
		}
		// The old server had already released its socket: bind anew.
	}
	h, err := startH3(l, cfg)
	if err != nil {
		return err
	}
	l.h3 = h
	return nil
}

// closeH3 closes the listener's HTTP/3 server in the background; the
// returned channel is closed when it is done.
func (l *Listener) closeH3(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	h := l.h3
	go func() {
		defer close(done)
		if h != nil {
			h.close(ctx)
		}
	}()
	return done
}

// startH3 binds a UDP socket on the listener's bound address (so a
// configured port 0 gets the TCP side's port) and serves HTTP/3 on it.
func startH3(l *Listener, cfg snapshot.Listener) (*h3server, error) {
	addr := l.ln.Addr().String()
	var pc net.PacketConn
	var err error
	if l.env.Sockets != nil {
		pc, err = l.env.Sockets.ListenPacket(cfg.Name, cfg.Address, addr)
	} else {
		var lc net.ListenConfig
		pc, err = lc.ListenPacket(context.Background(), "udp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("listener %q: h3: listen on udp %s: %w", cfg.Name, addr, err)
	}
	udp, ok := pc.(*net.UDPConn)
	if !ok {
		_ = pc.Close()
		return nil, fmt.Errorf("listener %q: h3: socket for udp %s is a %T, not a UDP socket", cfg.Name, addr, pc)
	}
	// Errors here only mean a smaller buffer; what was granted is read back
	// below, after quic-go (which retries with SO_RCVBUFFORCE when it has
	// CAP_NET_ADMIN and the size is under its own 7 MiB wish) had its turn.
	_ = udp.SetReadBuffer(H3SocketBuffer)
	_ = udp.SetWriteBuffer(H3SocketBuffer)
	h := &h3server{l: l, udp: udp, gens: map[*h3gen]struct{}{}}
	h.tr = &quic.Transport{Conn: udp, ConnContext: h.admit}
	h.tls = http3.ConfigureTLSConfig(&tls.Config{MinVersion: tls.VersionTLS13, GetCertificate: l.certificate})
	h.tickets = newTicketKeeper(l.env.Tickets, l.name+"/quic", l.env.Log)
	h.tickets.use(h.tls)
	g := h.newGen(cfg)
	h.gens[g] = struct{}{}
	h.cur.Store(g)
	if err := h.listen(); err != nil {
		_ = h.tr.Close()
		_ = udp.Close()
		return nil, fmt.Errorf("listener %q: h3: %w", cfg.Name, err)
	}
	h.checkBuffers()
	l.env.Metrics.h3.set(h)
	return h, nil
}

func (h *h3server) newGen(cfg snapshot.Listener) *h3gen {
	idle := time.Duration(cfg.IdleTimeoutMs) * time.Millisecond
	qc := &quic.Config{
		HandshakeIdleTimeout:           time.Duration(cfg.ReadHeaderTimeoutMs) * time.Millisecond,
		MaxIdleTimeout:                 idle,
		MaxIncomingStreams:             int64(cfg.H2MaxConcurrentStreams),
		InitialStreamReceiveWindow:     h3StreamWindow,
		MaxStreamReceiveWindow:         h3StreamWindow,
		InitialConnectionReceiveWindow: h3ConnWindow,
		MaxConnectionReceiveWindow:     h3ConnWindow,
	}
	return &h3gen{
		key:      h3Key(cfg),
		quic:     qc,
		maxConns: int64(cfg.MaxConnections),
		srv: &http3.Server{
			Handler: withBodyTimeout(h3Bodyless{h.l.env.Handler(cfg.Name)},
				time.Duration(cfg.RequestBodyTimeoutMs)*time.Millisecond, h.l.env.Metrics.BodyTimeouts.WithLabelValues("h3")),
			MaxHeaderBytes: cfg.MaxHeaderBytes,
			IdleTimeout:    idle,
			Logger:         h.l.env.Log,
		},
	}
}

// listen starts accepting QUIC connections (no 0-RTT: early data could be
// replayed, and the proxy forwards writes). Each new connection takes the
// QUIC settings of the current generation.
func (h *h3server) listen() error {
	qc := h.cur.Load().quic.Clone()
	qc.GetConfigForClient = func(*quic.ClientInfo) (*quic.Config, error) { return h.cur.Load().quic, nil }
	ln, err := h.tr.Listen(h.tls, qc)
	if err != nil {
		return fmt.Errorf("listen for QUIC: %w", err)
	}
	h.ln, h.loopDone = ln, make(chan struct{})
	go h.acceptLoop(ln, h.loopDone)
	return nil
}

// admit bounds QUIC connections (handshaking or open) by max_connections;
// it runs before a new connection's handshake.
func (h *h3server) admit(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
	h.tickets.check()
	if h.conns.Add(1) > h.cur.Load().maxConns {
		h.conns.Add(-1)
		h.l.env.Metrics.ConnRejected.WithLabelValues(h.l.name, "max_connections").Inc()
		return nil, errH3Full
	}
	context.AfterFunc(ctx, func() { h.conns.Add(-1) }) // ctx ends with the connection
	return ctx, nil
}

func (h *h3server) acceptLoop(ln *quic.Listener, done chan struct{}) {
	defer close(done)
	accepted := h.l.env.Metrics.ConnAccepted.WithLabelValues(h.l.name, "h3")
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			if !errors.Is(err, quic.ErrServerClosed) {
				h.l.env.Log.Error("HTTP/3 listener stopped", "listener", h.l.name, "err", err)
			}
			return
		}
		accepted.Inc()
		h.l.env.Metrics.Handshakes.WithLabelValues(h.l.name, "quic", strconv.FormatBool(conn.ConnectionState().TLS.DidResume)).Inc()
		h.serving.Add(1)
		go h.serve(conn)
	}
}

func (h *h3server) serve(conn *quic.Conn) {
	defer h.serving.Done()
	g := h.cur.Load()
	for {
		err := g.srv.ServeQUICConn(conn)
		next := h.cur.Load()
		// A server that is shutting down refuses a connection without
		// touching it: hand it to the generation that replaced it.
		if !errors.Is(err, http.ErrServerClosed) || next == g || conn.Context().Err() != nil {
			break
		}
		g = next
	}
	_ = conn.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
}

// apply moves a running or draining server to cfg's settings. It reports
// false when the server has already released its socket.
func (h *h3server) apply(cfg snapshot.Listener) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return false, nil
	}
	old := h.cur.Load()
	if h.ln != nil && old.key == h3Key(cfg) {
		return true, nil
	}
	g := h.newGen(cfg)
	h.gens[g] = struct{}{}
	h.cur.Store(g)
	if h.ln != nil {
		h.retire(old)
		return true, nil
	}
	// h3 was switched off and is still draining: listen again.
	if err := h.listen(); err != nil {
		delete(h.gens, g)
		h.cur.Store(old)
		return true, fmt.Errorf("listener %q: h3: %w", cfg.Name, err)
	}
	h.l.env.Metrics.h3.set(h)
	return true, nil
}

// stop stops accepting HTTP/3 connections; the open ones drain in the
// background and the socket is released when they are done.
func (h *h3server) stop() {
	h.mu.Lock()
	ln, done := h.ln, h.loopDone
	h.mu.Unlock()
	if ln == nil {
		return
	}
	h.l.env.Metrics.h3.drop(h)
	_ = ln.Close()
	<-done
	h.mu.Lock()
	h.ln = nil
	h.retire(h.cur.Load())
	h.mu.Unlock()
}

// retire drains a generation in the background (GOAWAY, then in-flight
// requests finish within DrainTimeout). Called with h.mu held.
func (h *h3server) retire(g *h3gen) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		defer cancel()
		_ = g.srv.Shutdown(ctx)
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.gens, g)
		if h.ln == nil && len(h.gens) == 0 {
			h.release()
		}
	}()
}

// release closes the transport (and with it any connection left) and the
// socket. Called with h.mu held.
func (h *h3server) release() {
	if h.released {
		return
	}
	h.released = true
	_ = h.tr.Close()
	_ = h.udp.Close()
}

// close stops accepting, shuts every generation down gracefully within ctx
// (closing what is left when ctx ends), and releases the socket.
func (h *h3server) close(ctx context.Context) {
	h.l.env.Metrics.h3.drop(h)
	h.mu.Lock()
	ln, done := h.ln, h.loopDone
	h.ln = nil
	gens := make([]*h3gen, 0, len(h.gens))
	for g := range h.gens {
		gens = append(gens, g)
	}
	h.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
		<-done
	}
	var wg sync.WaitGroup
	for _, g := range gens {
		wg.Go(func() { _ = g.srv.Shutdown(ctx) })
	}
	wg.Wait()
	h.mu.Lock()
	h.release()
	h.mu.Unlock()
	h.serving.Wait()
}

// checkBuffers reads back the socket buffers the kernel granted and warns
// when they are smaller than asked.
func (h *h3server) checkBuffers() {
	rc, err := h.udp.SyscallConn()
	if err != nil {
		return
	}
	get := func(opt int) (v int) {
		_ = rc.Control(func(fd uintptr) { v, _ = getsockoptInt(syscall.GetsockoptInt, fd, syscall.SOL_SOCKET, opt) })
		return v
	}
	h.rcvBuf = get(syscall.SO_RCVBUF)
	for _, b := range []struct {
		what, sysctl string
		got          int
	}{{"receive", "net.core.rmem_max", h.rcvBuf}, {"send", "net.core.wmem_max", get(syscall.SO_SNDBUF)}} {
		granted := b.got
		if runtime.GOOS == "linux" {
			granted /= 2 // Linux reports twice the size set, for its bookkeeping
		}
		if granted < H3SocketBuffer {
			h.l.env.Log.Warn("HTTP/3 UDP "+b.what+" buffer capped by the kernel; raise sysctl "+b.sysctl+
				" to at least "+strconv.Itoa(H3SocketBuffer)+" (see https://github.com/quic-go/quic-go/wiki/UDP-Buffer-Sizes)",
				"listener", h.l.name, "asked_bytes", H3SocketBuffer, "granted_bytes", granted,
				"getsockopt_bytes", b.got, "sysctl", b.sysctl)
		}
	}
}

// h3Bodyless gives a request without a body the shape HTTP/1.1 and HTTP/2
// give it (Body http.NoBody, ContentLength 0). HTTP/3 cannot say "no body"
// in the head: a GET arrives with a body of unknown length that ends at once
// (its FIN comes with the HEADERS frame), which the request path would
// forward as an empty chunked body and treat as not replayable. For methods
// that carry no body in practice, the first read tells; a body that does
// come is passed on unchanged.
type h3Bodyless struct{ next http.Handler }

func (h h3Bodyless) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete, http.MethodTrace:
			var b [1]byte
			n, err := r.Body.Read(b[:])
			switch {
			case n == 0 && err == io.EOF:
				r.Body, r.ContentLength = http.NoBody, 0
			case n > 0:
				r.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(b[:n]), r.Body), Closer: r.Body}
			}
		}
	}
	h.next.ServeHTTP(w, r)
}

type prefixedBody struct {
	io.Reader
	io.Closer
}

// getsockoptInt calls syscall.GetsockoptInt, whose descriptor is an int on
// Unix and a Handle on Windows, so that this file builds on both.
func getsockoptInt[FD ~int | ~uintptr](get func(FD, int, int) (int, error), fd uintptr, level, opt int) (int, error) {
	return get(FD(fd), level, opt)
}

// withAltSvc announces HTTP/3 on the TCP side of a listener that serves it:
// Alt-Svc: h3=":<port>"; ma=86400 on every response.
func (l *Listener) withAltSvc(cfg snapshot.Listener, next http.Handler) http.Handler {
	if !wantsH3(cfg) {
		return next
	}
	_, port, _ := net.SplitHostPort(l.ln.Addr().String())
	v := fmt.Sprintf(`h3=":%s"; ma=%d`, port, altSvcMaxAge)
	return &altSvc{next: next, value: []string{v}}
}

type altSvc struct {
	next  http.Handler
	value []string // shared by every response: len == cap, so an append copies
}

func (a *altSvc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["Alt-Svc"] = a.value
	a.next.ServeHTTP(w, r)
}

// h3Collector exports rampart_h3_udp_receive_buffer_bytes{listener} for the
// listeners that serve HTTP/3 (one per Metrics).
type h3Collector struct {
	mu     sync.Mutex
	byName map[string]*h3server
}

var h3RcvBufDesc = prometheus.NewDesc("rampart_h3_udp_receive_buffer_bytes",
	"Receive buffer of a listener's HTTP/3 UDP socket, as the kernel reports it (SO_RCVBUF; Linux reports twice the size granted).",
	[]string{"listener"}, nil)

func (c *h3Collector) set(h *h3server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byName[h.l.name] = h
}

// drop forgets h unless another listener of that name has taken over.
func (c *h3Collector) drop(h *h3server) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName[h.l.name] == h {
		delete(c.byName, h.l.name)
	}
}

func (c *h3Collector) Describe(ch chan<- *prometheus.Desc) { ch <- h3RcvBufDesc }

func (c *h3Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, h := range c.byName {
		ch <- prometheus.MustNewConstMetric(h3RcvBufDesc, prometheus.GaugeValue, float64(h.rcvBuf), name)
	}
}
