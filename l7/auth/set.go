package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Options are the process-wide settings of a Set. A key set carried over
// from a previous Set keeps the options it was created with.
type Options struct {
	// HTTPClient fetches key sets; default a client with a 10 s timeout.
	// Each fetch is bounded to 10 s and 1 MiB whatever the client says.
	HTTPClient *http.Client
	Logger     *slog.Logger     // default slog.Default()
	Now        func() time.Time // default time.Now; for tests
}

// Set holds the auth policies of one snapshot.
type Set struct {
	policies map[string]*Policy
	sources  map[srcKey]*source
	once     sync.Once
}

// Policy authenticates requests for the routes that name it.
type Policy struct {
	id     string
	header string // canonical form, so the lookup is one map access
	jwt    *jwtPolicy
	apiKey *apiKeyPolicy
}

// maxFileBytes bounds a jwks_file.
const maxFileBytes = maxJWKSBytes

// NewSet builds the policies of a snapshot. Key sets from jwks_url whose
// URL and refresh interval are unchanged since prev are carried over with
// their cached keys and refresh schedule (prev may be nil; it stays
// usable, and the caller closes it once it is no longer in use). New URLs
// are fetched once, concurrently, for at most 5 s: an issuer that cannot
// be reached does not fail NewSet, its tokens fail until a fetch succeeds.
// A jwks_file is read now; an unreadable or unusable file is an error.
func NewSet(policies []snapshot.AuthPolicy, prev *Set, opts Options) (*Set, error) {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Set{policies: make(map[string]*Policy, len(policies)), sources: map[srcKey]*source{}}
	var fresh []*source
	for i := range policies {
		ap := &policies[i]
		p := &Policy{id: ap.ID}
		var err error
		switch {
		case s.policies[ap.ID] != nil:
			err = errors.New("duplicate id")
		case ap.Type == "jwt" && ap.JWT != nil && ap.APIKey == nil:
			err = s.buildJWT(p, ap.JWT, prev, opts, &fresh)
		case ap.Type == "api_key" && ap.APIKey != nil && ap.JWT == nil:
			err = p.buildAPIKey(ap.APIKey)
		default:
			err = fmt.Errorf("type %q needs its own block and only that", ap.Type)
		}
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("auth policy %q: %w", ap.ID, err)
		}
		s.policies[ap.ID] = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), initialFetchWait)
	defer cancel()
	var wg sync.WaitGroup
	for _, src := range fresh {
		wg.Go(func() { src.initialFetch(ctx) })
	}
	wg.Wait()
	return s, nil
}

// Policy returns the policy with the id, or nil.
func (s *Set) Policy(id string) *Policy { return s.policies[id] }

// Close stops the background refresh of key sets no other Set uses. It is
// idempotent; policies keep answering from the keys they have.
func (s *Set) Close() {
	s.once.Do(func() {
		for _, src := range s.sources {
			src.release()
		}
	})
}

// ID is the policy's id.
func (p *Policy) ID() string { return p.id }

// Authenticate verifies the credential in h. Errors are *Failure.
func (p *Policy) Authenticate(h http.Header) (Identity, error) {
	vals := h[p.header]
	if p.jwt != nil {
		return p.jwt.authenticate(p.id, vals)
	}
	return p.apiKey.authenticate(p.id, vals)
}

func orDefault(v, d int) time.Duration {
	if v <= 0 {
		v = d
	}
	return time.Duration(v) * time.Millisecond
}

func (s *Set) buildJWT(p *Policy, c *snapshot.JWTPolicy, prev *Set, opts Options, fresh *[]*source) error {
	j := &jwtPolicy{
		issuer:      c.Issuer,
		audiences:   slices.Clone(c.Audiences),
		leeway:      orDefault(c.LeewayMs, snapshot.DefaultLeewayMs),
		maxStale:    orDefault(c.JWKSMaxStaleMs, snapshot.DefaultJWKSMaxStaleMs),
		refetchGap:  orDefault(c.UnknownKidRefetchMs, snapshot.DefaultUnknownKidRefetchMs),
		tenantClaim: cmp(c.TenantClaim, "tenant"),
		scopesClaim: cmp(c.ScopesClaim, "scope"),
		types:       newTokenTypes(c),
		now:         opts.Now,
	}
	p.header = http.CanonicalHeaderKey(cmp(c.Header, "Authorization"))
	if j.issuer == "" || len(j.audiences) == 0 {
		return errors.New("jwt needs an issuer and at least one audience")
	}
	hmac := false
	for _, name := range c.Algorithms {
		a := algs[name]
		if a == nil {
			return fmt.Errorf("algorithm %q is not supported", name)
		}
		hmac = hmac || a.fam == famHMAC
		j.allowed = append(j.allowed, a)
	}
	if len(j.allowed) == 0 {
		return errors.New("jwt needs at least one algorithm")
	}
	switch {
	case (c.JWKSURL == "") == (c.JWKSFile == ""):
		return errors.New("exactly one of jwks_url and jwks_file is needed")
	case c.JWKSFile != "":
		ks, err := readKeyFile(c.JWKSFile, opts.Logger)
		if err != nil {
			return err
		}
		j.static = ks
	case hmac:
		return errors.New("HMAC secrets are never fetched from a URL")
	default:
		key := srcKey{url: c.JWKSURL, refresh: orDefault(c.JWKSRefreshMs, snapshot.DefaultJWKSRefreshMs)}
		if key.refresh < refreshWindow {
			return fmt.Errorf("jwks_refresh_ms %d is below %d", c.JWKSRefreshMs, refreshWindow.Milliseconds())
		}
		src, err := s.source(key, prev, opts, fresh)
		if err != nil {
			return err
		}
		j.src = src
	}
	p.jwt = j
	return nil
}

func cmp(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// source returns the set's source for key: already used by this set,
// carried over from prev, or new.
func (s *Set) source(key srcKey, prev *Set, opts Options, fresh *[]*source) (*source, error) {
	if src := s.sources[key]; src != nil {
		return src, nil
	}
	if prev != nil {
		if src := prev.sources[key]; src != nil && src.acquire() {
			s.sources[key] = src
			return src, nil
		}
	}
	src, err := newSource(key, opts)
	if err != nil {
		return nil, err
	}
	s.sources[key] = src
	*fresh = append(*fresh, src)
	return src, nil
}

// readKeyFile reads a jwks_file; keys it cannot use are logged and
// skipped, a file with none is an error.
func readKeyFile(path string, log *slog.Logger) (*keySet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("jwks_file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("jwks_file %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("jwks_file %s: larger than %d bytes", path, maxFileBytes)
	}
	ks, skipped, err := parseKeySet(data, time.Time{})
	if err != nil {
		if len(skipped) > 0 {
			err = fmt.Errorf("%w (%s)", err, strings.Join(skipped, "; "))
		}
		return nil, fmt.Errorf("jwks_file %s: %w", path, err)
	}
	for _, m := range skipped {
		log.Warn("JWKS key skipped", "jwks_file", path, "key", m)
	}
	return ks, nil
}
