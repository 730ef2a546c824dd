package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

const (
	maxJWKSBytes     = 1 << 20          // a key set larger than this is refused
	fetchTimeout     = 10 * time.Second // one JWKS request, start to last byte
	initialFetchWait = 5 * time.Second  // how long NewSet waits for new key sets
	refetchWait      = 2 * time.Second  // how long a request waits for an unknown-kid refetch
	refreshWindow    = time.Second      // jwk.Cache's scheduling tick
)

// srcKey identifies a JWKS source; sets with equal keys share one.
type srcKey struct {
	url     string
	refresh time.Duration
}

// source is one JWKS URL: a jwk.Cache refreshes it in the background and
// every good fetch is converted and published in keys, which the request
// path reads with one atomic load.
type source struct {
	key   srcKey
	hc    limitedClient
	now   func() time.Time
	log   *slog.Logger
	keys  atomic.Pointer[keySet]
	cache *jwk.Cache

	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	refs      int           // Sets using the source; 0: stopped
	lastFetch time.Time     // last fetch started here or succeeded anywhere
	inflight  chan struct{} // closed when the running refetch ends
}

type sinkFunc func(error)

func (f sinkFunc) Error(err error) { f(err) }

func newSource(key srcKey, opts Options) (*source, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &source{key: key, now: opts.Now, log: opts.Logger, ctx: ctx, cancel: cancel, refs: 1,
		hc: limitedClient{ctx: ctx, c: opts.HTTPClient}}
	s.cache = jwk.NewCache(ctx, jwk.WithRefreshWindow(refreshWindow), jwk.WithErrSink(sinkFunc(func(err error) {
		s.log.Warn("JWKS refresh failed; keeping the last good key set", "jwks_url", key.url, "error", err)
	})))
	err := s.cache.Register(key.url, jwk.WithHTTPClient(s.hc), jwk.WithRefreshInterval(key.refresh),
		jwk.WithPostFetcher(jwk.PostFetchFunc(s.postFetch)))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("jwks_url %q: %w", key.url, err)
	}
	return s, nil
}

// postFetch runs after each successful fetch and parse by the cache.
func (s *source) postFetch(_ string, set jwk.Set) (jwk.Set, error) {
	ks, skipped, err := newKeySet(set, s.now())
	s.logSkipped(skipped)
	if err != nil {
		return nil, err // the cache reports it; the last good set stays
	}
	s.publish(ks)
	return set, nil
}

func (s *source) publish(ks *keySet) {
	s.keys.Store(ks)
	s.mu.Lock()
	s.lastFetch = ks.fetchedAt
	s.mu.Unlock()
}

func (s *source) logSkipped(skipped []string) {
	for _, m := range skipped {
		s.log.Warn("JWKS key skipped", "jwks_url", s.key.url, "key", m)
	}
}

// initialFetch fetches a new source's key set once, through the cache
// (which then schedules the background refresh).
func (s *source) initialFetch(ctx context.Context) {
	s.mu.Lock()
	s.lastFetch = s.now()
	s.mu.Unlock()
	if _, err := s.cache.Get(ctx, s.key.url); err != nil || s.keys.Load() == nil {
		s.log.Warn("JWKS initial fetch failed; tokens fail until a fetch succeeds",
			"jwks_url", s.key.url, "error", err)
	}
}

// refetch fetches the key set now unless one was fetched less than gap
// ago, or joins a refetch already running, and waits (at most
// refetchWait) for it. Concurrent callers start at most one fetch. It
// reports whether a fetch ended while it waited.
func (s *source) refetch(gap time.Duration) bool {
	s.mu.Lock()
	done := s.inflight
	if done == nil {
		now := s.now()
		if now.Sub(s.lastFetch) < gap || s.refs == 0 {
			s.mu.Unlock()
			return false
		}
		s.lastFetch = now
		done = make(chan struct{})
		s.inflight = done
		go s.fetchNow(done)
	}
	s.mu.Unlock()
	t := time.NewTimer(refetchWait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// fetchNow fetches directly rather than with jwk.Cache.Refresh: in
// httprc v1 every Refresh schedules one more periodic refresh, so refetches
// would pile up into ever more background fetches.
func (s *source) fetchNow(done chan struct{}) {
	defer func() {
		s.mu.Lock()
		s.inflight = nil
		s.mu.Unlock()
		close(done)
	}()
	err := func() error {
		res, err := s.hc.Get(s.key.url)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", res.Status)
		}
		data, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		ks, skipped, err := parseKeySet(data, s.now())
		s.logSkipped(skipped)
		if err != nil {
			return err
		}
		s.publish(ks)
		return nil
	}()
	if err != nil {
		s.log.Warn("JWKS refetch for an unknown kid failed", "jwks_url", s.key.url, "error", err)
	}
}

func (s *source) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		return false
	}
	s.refs++
	return true
}

func (s *source) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs--; s.refs == 0 {
		s.cancel() // stops the cache's goroutines and any fetch
	}
}

// limitedClient is the cache's HTTP client: each request is bounded in
// time (fetchTimeout, also when the configured client has no timeout) and
// its body in size (maxJWKSBytes).
type limitedClient struct {
	ctx context.Context
	c   *http.Client
}

func (l limitedClient) Get(u string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(l.ctx, fetchTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	res, err := l.c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	res.Body = &cancelBody{ReadCloser: http.MaxBytesReader(nil, res.Body, maxJWKSBytes), cancel: cancel}
	return res, nil
}

// cancelBody releases the request's context at EOF, on error or on Close
// (jwk.Cache reads the body to the end but does not close it).
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.cancel()
	}
	return n, err
}

func (b *cancelBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}
