package listener

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"

	"github.com/rampart-edge/rampart/l7/h1"
	"github.com/rampart-edge/rampart/l7/h2"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Listener owns one listening socket and its accept loop. What it does with
// a connection (limits, TLS, HTTP servers) belongs to its current
// generation; a snapshot that changes a listener's settings starts a new
// generation on the same socket, so no connection attempt is refused, and
// the old generation drains its connections in the background.
type Listener struct {
	env     *Env
	name    string
	address string // as configured (port 0 stays 0)
	ln      net.Listener
	gen     atomic.Pointer[generation]
	done    chan struct{}
	h3      *h3server     // HTTP/3 on the same address when protocols include h3 (h3.go)
	tickets *ticketKeeper // the current generation's TLS ticket keys (tickets.go); nil: Go's own
}

// generation is a listener's settings and servers from one snapshot.
type generation struct {
	l      *Listener
	cfg    snapshot.Listener
	key    string
	tls    *tls.Config
	h1     *h1.Server
	h2     *http2.Server
	h2base *http.Server // configuration and graceful shutdown for h2
	h2r    *h2.Server   // rampart's HTTP/2 server, when h2_server is rampart
	sem    chan struct{}

	wg      sync.WaitGroup // every connection's goroutine
	mu      sync.Mutex
	h2conns map[net.Conn]struct{}
}

// settingsKey is everything about a listener, but its certificates (looked
// up per handshake), that needs new servers when it changes.
func settingsKey(l snapshot.Listener) string {
	c := l
	if c.TLS != nil {
		t := *c.TLS
		t.Certificates = nil
		c.TLS = &t
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// portZeroTries bounds the binds of a port-0 listener with HTTP/3: the
// kernel picks the TCP port, and the UDP socket needs the same number,
// which another UDP socket may already hold. A TCP socket whose number is
// taken on UDP stays open until a pair is found, so the kernel cannot
// pick that number again (bind prefers odd ports and would).
const portZeroTries = 16

// Listen binds cfg's address (TCP, and UDP for HTTP/3) and starts serving
// it with env; a port-0 address gets a kernel-chosen port (the same for
// both with HTTP/3).
func Listen(cfg snapshot.Listener, env *Env) (*Listener, error) {
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for try := 1; ; try++ {
		l, clash, err := listenOnce(cfg, env)
		if clash == nil {
			return l, err
		}
		held = append(held, clash)
		if try == portZeroTries {
			return nil, fmt.Errorf("listener %q: no port free for both TCP and UDP after %d tries: %w", cfg.Name, try, err)
		}
	}
}

func portZero(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && (port == "0" || port == "")
}

// listenOnce binds and starts the listener. When a port-0 listener's UDP
// side found its number taken, it returns the TCP socket as clash (open,
// for the caller to hold and close) with the error.
func listenOnce(cfg snapshot.Listener, env *Env) (l *Listener, clash net.Listener, err error) {
	var ln net.Listener
	if env.Sockets != nil {
		ln, err = env.Sockets.Listen(cfg.Name, cfg.Address, cfg.Address)
	} else {
		lc := net.ListenConfig{}
		lc.SetMultipathTCP(false)
		ln, err = lc.Listen(context.Background(), "tcp", cfg.Address)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listener %q: listen on %s: %w", cfg.Name, cfg.Address, err)
	}
	l = &Listener{env: env, name: cfg.Name, address: cfg.Address, ln: ln, done: make(chan struct{}),
		tickets: newTicketKeeper(env.Tickets, cfg.Name+"/tcp", env.Log)}
	g, err := l.newGeneration(cfg)
	if err != nil {
		_ = ln.Close()
		return nil, nil, err
	}
	if err := l.setH3(cfg); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) && portZero(cfg.Address) {
			return nil, ln, err
		}
		_ = ln.Close()
		return nil, nil, err
	}
	l.tickets.use(g.tls)
	l.gen.Store(g)
	go l.acceptLoop()
	return l, nil, nil
}

// Addr is the address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

func (l *Listener) newGeneration(cfg snapshot.Listener) (*generation, error) {
	g := &generation{l: l, cfg: cfg, key: settingsKey(cfg),
		sem: make(chan struct{}, cfg.MaxConnections), h2conns: map[net.Conn]struct{}{}}
	handler := l.withAltSvc(cfg, l.env.Handler(cfg.Name))
	bodyTimeout := time.Duration(cfg.RequestBodyTimeoutMs) * time.Millisecond
	h1Timeouts := l.env.Metrics.BodyTimeouts.WithLabelValues("http1")
	g.h1 = &h1.Server{
		Handler:           handler,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: time.Duration(cfg.ReadHeaderTimeoutMs) * time.Millisecond,
		IdleTimeout:       time.Duration(cfg.IdleTimeoutMs) * time.Millisecond,
		BodyReadTimeout:   bodyTimeout,
		BodyTimedOut:      h1Timeouts.Inc,
		Logger:            l.env.Log,
		Rejected: func(remote string, status int, reason string) {
			l.env.Refused(remote, "HTTP/1.1", status, parserReason(status, reason), "refused by the HTTP/1.1 parser: "+reason)
		},
	}
	if cfg.TLS != nil {
		g.tls = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: l.certificate}
		if cfg.TLS.MinVersion == "1.3" {
			g.tls.MinVersion = tls.VersionTLS13
		}
		if slices.Contains(cfg.Protocols, "h2") {
			g.tls.NextProtos = append(g.tls.NextProtos, "h2")
		}
		if slices.Contains(cfg.Protocols, "http1") {
			g.tls.NextProtos = append(g.tls.NextProtos, "http/1.1")
		}
		h2Handler := withBodyTimeout(handler, bodyTimeout, l.env.Metrics.BodyTimeouts.WithLabelValues("h2"))
		if H2ServerOf(cfg) == "rampart" {
			g.h2r = l.rampartH2(cfg, h2Handler, g.h1)
			return g, nil
		}
		g.h2base = &http.Server{
			Handler:           h2Handler,
			ReadHeaderTimeout: g.h1.ReadHeaderTimeout,
			IdleTimeout:       g.h1.IdleTimeout,
			MaxHeaderBytes:    cfg.MaxHeaderBytes,
			ErrorLog:          l.env.ErrorLog,
		}
		g.h2 = &http2.Server{
			MaxConcurrentStreams:         uint32(cfg.H2MaxConcurrentStreams),
			IdleTimeout:                  g.h1.IdleTimeout,
			MaxUploadBufferPerStream:     256 << 10,
			MaxUploadBufferPerConnection: 1 << 20,
		}
		if err := http2.ConfigureServer(g.h2base, g.h2); err != nil {
			return nil, fmt.Errorf("listener %q: configure http2: %w", cfg.Name, err)
		}
	}
	return g, nil
}

// Update moves the listener to cfg's settings if they changed; the old
// generation drains in the background.
func (l *Listener) Update(cfg snapshot.Listener) error {
	old := l.gen.Load()
	if old.key == settingsKey(cfg) {
		return nil
	}
	g, err := l.newGeneration(cfg)
	if err != nil {
		return err
	}
	if err := l.setH3(cfg); err != nil {
		return err
	}
	l.tickets.use(g.tls)
	l.gen.Store(g)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
		defer cancel()
		old.shutdown(ctx)
	}()
	return nil
}

// DrainTimeout bounds the drain of a retired listener or generation.
const DrainTimeout = 30 * time.Second

func (l *Listener) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return l.env.Certificate(l.name, hello)
}

func (l *Listener) acceptLoop() {
	defer close(l.done)
	var backoff time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			l.env.Log.Warn("accept failed", "listener", l.name, "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		l.gen.Load().accept(c)
	}
}

func (g *generation) accept(c net.Conn) {
	m := g.l.env.Metrics
	select {
	case g.sem <- struct{}{}:
	default:
		m.ConnRejected.WithLabelValues(g.cfg.Name, "max_connections").Inc()
		_ = c.Close()
		return
	}
	g.wg.Add(1)
	if g.tls == nil {
		m.ConnAccepted.WithLabelValues(g.cfg.Name, "http1").Inc()
		go g.serveH1(c)
		return
	}
	go g.handshake(c)
}

func (g *generation) serveH1(c net.Conn) {
	defer g.wg.Done()
	defer g.release()
	g.h1.ServeConn(c)
}

func (g *generation) release() { <-g.sem }

func (g *generation) handshake(c net.Conn) {
	defer g.wg.Done()
	defer g.release()
	m := g.l.env.Metrics
	g.l.tickets.check()
	tc := tls.Server(c, g.tls)
	_ = c.SetDeadline(time.Now().Add(time.Duration(g.cfg.ReadHeaderTimeoutMs) * time.Millisecond))
	if err := tc.Handshake(); err != nil {
		m.ConnRejected.WithLabelValues(g.cfg.Name, "tls_handshake").Inc()
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	cs := tc.ConnectionState()
	m.Handshakes.WithLabelValues(g.cfg.Name, "tcp", strconv.FormatBool(cs.DidResume)).Inc()
	if cs.NegotiatedProtocol != "h2" {
		m.ConnAccepted.WithLabelValues(g.cfg.Name, "http1").Inc()
		g.h1.ServeConn(tc)
		return
	}
	m.ConnAccepted.WithLabelValues(g.cfg.Name, "h2").Inc()
	if g.h2r != nil {
		g.h2r.ServeConn(tc)
		return
	}
	guard := newH2Guard(tc, g.cfg.H2MaxResetsPerSecond, func(reason string) {
		m.H2Abuse.WithLabelValues(reason).Inc()
		g.l.env.Log.Warn("closing abusive HTTP/2 connection", "listener", g.cfg.Name,
			"remote", c.RemoteAddr().String(), "reason", reason)
	})
	guard.out.onRefusal = func(status int, reason, detail string) {
		g.l.env.Refused(c.RemoteAddr().String(), "HTTP/2.0", status, reason, "refused by the HTTP/2 server: "+detail)
	}
	g.mu.Lock()
	g.h2conns[guard] = struct{}{}
	g.mu.Unlock()
	g.h2.ServeConn(guard, &http2.ServeConnOpts{BaseConfig: g.h2base, Handler: g.h2base.Handler})
	g.mu.Lock()
	delete(g.h2conns, guard)
	g.mu.Unlock()
}

// shutdown lets HTTP/1.1 connections finish their request and sends GOAWAY
// on HTTP/2 ones; when ctx ends it closes what is left.
func (g *generation) shutdown(ctx context.Context) {
	if g.h2base != nil {
		_ = g.h2base.Shutdown(ctx) // starts HTTP/2 graceful shutdown (GOAWAY)
	}
	if g.h2r != nil {
		go func() { _ = g.h2r.Shutdown(ctx) }() // GOAWAY; closes what is left when ctx ends
	}
	go func() { _ = g.h1.Shutdown(ctx) }()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.mu.Lock()
		for c := range g.h2conns {
			_ = c.Close()
		}
		g.mu.Unlock()
		<-done
	}
}

// Close stops the accept loop, then drains the current generation.
func (l *Listener) Close(ctx context.Context) {
	_ = l.ln.Close()
	<-l.done
	h3done := l.closeH3(ctx)
	l.gen.Load().shutdown(ctx)
	<-h3done
}
