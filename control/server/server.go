// Package server wires a control plane instance together from its
// config: the store (embedded or PostgreSQL), the plane, the HTTP API
// (optionally TLS and mTLS), and a clean shutdown.
package server

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/dashboard"
	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/control/store/boltstore"
	"github.com/rampart-edge/rampart/control/store/pgstore"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Server is one running control plane instance.
type Server struct {
	Store store.Store
	Plane *plane.Plane
	API   *api.API

	log    *slog.Logger
	http   *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Options are what a config file does not hold.
type Options struct {
	Logger *slog.Logger
	Key    ed25519.PrivateKey // overrides cfg.SigningKey (tests)
	Tick   time.Duration      // overrides cfg.Rollout.Tick when set
	// Postgres, when set, adjusts the PostgreSQL store's options before
	// it opens (tests and failover drills: pgstore.Options.BeforeCommit).
	Postgres func(*pgstore.Options)
}

// Open opens the store, starts the lease keeper and the plane; Serve
// then serves the API.
func Open(cfg *config.Config, o Options) (*Server, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	key := o.Key
	if key == nil {
		var err error
		if key, err = snapshot.ReadPrivateKey(cfg.SigningKey); err != nil {
			return nil, err
		}
	}
	tokens, err := cfg.APITokens()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := openStore(ctx, cfg, log, o.Postgres)
	if err != nil {
		cancel()
		return nil, err
	}
	tick := cfg.Rollout.Tick.D()
	if o.Tick > 0 {
		tick = o.Tick
	}
	p, err := plane.New(plane.Options{Store: st, Key: key, Policy: cfg.Policy(), Shadow: cfg.Shadow(),
		WatchTimeout: cfg.WatchTimeout.D(), Tick: tick, Logger: log,
		Regions: cfg.RegionRule(), RegionStateRefresh: cfg.RegionState.Refresh.D()})
	if err == nil {
		var a *api.API
		if a, err = api.New(p, tokens, log); err == nil {
			s := &Server{Store: st, Plane: p, API: a, log: log, cancel: cancel}
			s.wg.Add(2)
			go func() { defer s.wg.Done(); _ = st.Run(ctx) }()
			go func() { defer s.wg.Done(); _ = p.Run(ctx) }()
			return s, nil
		}
	}
	cancel()
	_ = st.Close()
	return nil, err
}

func openStore(ctx context.Context, cfg *config.Config, log *slog.Logger, adjust func(*pgstore.Options)) (store.Store, error) {
	host, _ := os.Hostname()
	switch cfg.Storage.Type {
	case "embedded":
		return boltstore.Open(cfg.Storage.Dir, host)
	case "postgres":
		dsn, err := cfg.PostgresDSN()
		if err != nil {
			return nil, err
		}
		pg := cfg.Storage.Postgres
		po := pgstore.Options{DSN: dsn, Instance: pg.Instance, LeaseTTL: pg.LeaseTTL.D(), TxIdleTimeout: pg.TxIdleTimeout.D(), Logger: log}
		if adjust != nil {
			adjust(&po)
		}
		return pgstore.Open(ctx, po)
	}
	return nil, fmt.Errorf("storage type %q", cfg.Storage.Type)
}

// TLSConfig builds the listener's TLS config (nil without tls).
func TLSConfig(c *config.TLS) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	crt, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("control tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{crt}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("control tls: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("control tls: %s holds no PEM certificate", c.ClientCAFile)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// Serve serves the API on ln (wrapped in TLS when tc is set) until Close.
func (s *Server) Serve(ln net.Listener, tc *tls.Config) error {
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	s.http = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Handler is everything the instance serves: the operator page under
// /ui/ (control/dashboard) and the API.
func (s *Server) Handler() http.Handler {
	m := http.NewServeMux()
	ui := dashboard.Handler()
	m.Handle("/ui/", ui)
	m.Handle("/ui", ui)
	m.Handle("/", s.API)
	return m
}

// Close stops serving (long-polls end), stops the plane, and closes the
// store, releasing the lease so another instance takes over at once.
func (s *Server) Close() error { return s.stop(true) }

// Kill stops the instance without releasing the lease, as a crash would
// (PostgreSQL store): another instance takes over when the lease expires.
func (s *Server) Kill() error { return s.stop(false) }

func (s *Server) stop(release bool) error {
	s.once.Do(func() {
		if s.http != nil {
			_ = s.http.Close()
		}
		s.cancel()
		s.wg.Wait()
		if pg, ok := s.Store.(*pgstore.Store); ok && !release {
			pg.Abandon()
			return
		}
		_ = s.Store.Close()
	})
	return nil
}

// Run serves cfg until ctx ends.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	tc, err := TLSConfig(cfg.TLS)
	if err != nil {
		return err
	}
	s, err := Open(cfg, Options{Logger: log})
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("control listener on %s: %w", cfg.Listen, err)
	}
	log.Info("rampart control started", "listen", ln.Addr().String(), "storage", cfg.Storage.Type,
		"tls", tc != nil, "leader", s.Store.Leader().Leader)
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln, tc) }()
	select {
	case <-ctx.Done():
		return s.Close()
	case err := <-errc:
		return err
	}
}
