package cache

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// Object is one stored response.
type Object struct {
	Status int
	Header http.Header // as received, without hop-by-hop fields, Age and Cache-Status
	Body   []byte
	Stored time.Time // when stored, or last refreshed by a 304
	// Fetched is when the request that produced the object (or its last
	// 304) went upstream; purges compare their time with it. Zero: Stored.
	Fetched  time.Time
	BaseAge  time.Duration // the Age the response came with (RFC 9111 4.2.3, corrected_initial_age)
	Lifetime time.Duration // freshness lifetime
	CC       ResponseCC
	// What purge rules match on.
	Route     string
	Target    string // host + path + ("?" query): what a key prefix matches
	Surrogate []string

	// Keep is how long past its freshness the object may still serve
	// (the longer of the stale windows).
	Keep time.Duration

	vary []string // request header names (canonical) of the secondary key; nil: none
}

// Age is the object's current age (RFC 9111 4.2.3).
func (o *Object) Age(now time.Time) time.Duration {
	a := o.BaseAge + now.Sub(o.Stored)
	if a < 0 {
		return 0
	}
	return a
}

// TTL is how long the object stays fresh from now (negative: stale by that much).
func (o *Object) TTL(now time.Time) time.Duration { return o.Lifetime - o.Age(now) }

// FetchedAt is Fetched, or Stored when Fetched is unset.
func (o *Object) FetchedAt() time.Time {
	if o.Fetched.IsZero() {
		return o.Stored
	}
	return o.Fetched
}

// Validators reports whether the object can be revalidated (ETag or Last-Modified).
func (o *Object) Validators() bool {
	return o.Header.Get("ETag") != "" || o.Header.Get("Last-Modified") != ""
}

// keep is how long the store holds the object past its freshness: Keep,
// or at least a minute to revalidate when it has validators.
func (o *Object) keep() time.Duration {
	k := o.Keep
	if o.Validators() && k < time.Minute {
		k = time.Minute
	}
	return k
}

func (o *Object) weight() uint32 {
	n := len(o.Body) + 256 + len(o.Target)
	for k, vs := range o.Header {
		n += len(k)
		for _, v := range vs {
			n += len(v) + 16
		}
	}
	return uint32(min(n, 1<<31))
}

type slot struct {
	obj    *Object
	vary   []string // set on a primary slot of a varying response: the names of the secondary key
	pass   bool     // the key's last response could not be stored (MarkPass)
	expire time.Duration
}

// Store holds objects by key, bounded by the bytes they weigh (otter's
// S3-FIFO admission and eviction by weight), each expiring when it is no
// longer useful even stale.
type Store struct {
	c         *otter.Cache[string, *slot]
	evictions atomic.Uint64
	OnEvict   func() // called for each eviction by size (metrics); may be nil

	// purges are the recent purges' tests, checked by Put: a response
	// fetched before a purge but stored after it must not survive it.
	// mu orders a Put's check-and-store against Purge recording its test
	// before it walks the store, so an object is either seen by the walk
	// or refused by the check.
	mu      sync.Mutex
	purges  []purgeMark
	refused atomic.Uint64
}

type purgeMark struct {
	at    time.Time
	match func(*Object) bool
}

// PurgeMemory is how long Put keeps checking a purge: a fetch that
// started before the purge and is stored later than this survives it.
const PurgeMemory = 10 * time.Minute

// maxPurgeMarks bounds the tests Put runs (the oldest go first).
const maxPurgeMarks = 256

// NewStore makes a store bounded by maxBytes.
func NewStore(maxBytes int64) *Store {
	s := &Store{}
	s.c = otter.Must(&otter.Options[string, *slot]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(k string, v *slot) uint32 {
			if v.obj == nil {
				return uint32(len(k) + 64)
			}
			return uint32(len(k)) + v.obj.weight()
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, *slot]) time.Duration { return e.Value.expire }),
		OnDeletion: func(e otter.DeletionEvent[string, *slot]) {
			if e.Cause == otter.CauseOverflow {
				s.evictions.Add(1)
				if f := s.OnEvict; f != nil {
					f()
				}
			}
		},
	})
	return s
}

// SetMaxBytes changes the bound (a new snapshot's limits.cache_max_bytes).
func (s *Store) SetMaxBytes(n int64) { s.c.SetMaximum(uint64(n)) }

// Bytes is the weight of what the store holds now.
func (s *Store) Bytes() uint64 { return s.c.WeightedSize() }

// Evictions counts objects evicted to stay within the bound.
func (s *Store) Evictions() uint64 { return s.evictions.Load() }

// Get finds the object for key that matches req's header on the stored
// response's Vary fields; nil when there is none.
func (s *Store) Get(key string, req http.Header) *Object {
	sl, ok := s.c.GetIfPresent(key)
	if !ok {
		return nil
	}
	if sl.vary == nil {
		return sl.obj
	}
	v, ok := s.c.GetIfPresent(secondaryKey(key, sl.vary, req))
	if !ok {
		return nil
	}
	return v.obj
}

// Put stores o under key (and, when the response varies, under the
// secondary key of req's header values), for its freshness and Keep;
// it reports false when o is not stored: not worth it, or a purge made
// while it was being fetched matches it.
func (s *Store) Put(key string, req http.Header, o *Object) bool {
	exp := o.Expiry()
	if exp <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.purges {
		if m.match(o) {
			s.refused.Add(1)
			return false
		}
	}
	vary := varyNames(o.Header)
	o.vary = vary
	if vary == nil {
		s.c.Set(key, &slot{obj: o, expire: exp})
		return true
	}
	// The primary slot names the fields; it outlives its variants a little.
	s.c.Set(key, &slot{vary: vary, expire: exp + time.Minute})
	s.c.Set(secondaryKey(key, vary, req), &slot{obj: o, expire: exp})
	return true
}

// MarkPass remembers for d that key's last response could not be stored,
// so that its misses go upstream at once instead of waiting for one
// another (Varnish's hit-for-miss): a response that is private, no-store
// or sets a cookie would otherwise queue every request of the key behind
// one fetch. A later storable response replaces the mark.
func (s *Store) MarkPass(key string, d time.Duration) {
	if d > 0 {
		s.c.Set(key, &slot{pass: true, expire: d})
	}
}

// Passing reports whether key carries a MarkPass mark.
func (s *Store) Passing(key string) bool {
	sl, ok := s.c.GetIfPresent(key)
	return ok && sl.pass
}

// Expiry is how long from its storing the store holds o: fresh, then
// stale for keep (0: o is not worth storing).
func (o *Object) Expiry() time.Duration {
	return max(o.Lifetime-o.BaseAge, 0) + o.keep()
}

// Refresh re-stores o after a 304 made it fresh again.
func (s *Store) Refresh(key string, req http.Header, o *Object) bool { return s.Put(key, req, o) }

// Delete removes key's object (and the variant req selects).
func (s *Store) Delete(key string, req http.Header) {
	sl, ok := s.c.GetIfPresent(key)
	if ok && sl.vary != nil {
		s.c.Invalidate(secondaryKey(key, sl.vary, req))
	}
	s.c.Invalidate(key)
}

// Purge removes every object match selects, as Remove does, and keeps
// match for PurgeMemory past at so that Put refuses what it selects among
// responses still being fetched. match must select only objects fetched
// before at (so what is fetched later stores again).
func (s *Store) Purge(at time.Time, match func(o *Object) bool) int {
	s.mu.Lock()
	keep := s.purges[:0]
	for _, m := range s.purges {
		if time.Since(m.at) < PurgeMemory {
			keep = append(keep, m)
		}
	}
	s.purges = append(keep, purgeMark{at: at, match: match})
	if n := len(s.purges); n > maxPurgeMarks {
		s.purges = append(s.purges[:0], s.purges[n-maxPurgeMarks:]...)
	}
	s.mu.Unlock()
	return s.Remove(match)
}

// PurgeRefused counts responses Put refused because a purge made while
// they were fetched selects them.
func (s *Store) PurgeRefused() uint64 { return s.refused.Load() }

// Remove deletes every object for which match returns true and reports
// how many it removed.
func (s *Store) Remove(match func(o *Object) bool) int {
	n := 0
	for k, sl := range s.c.All() {
		if sl.obj != nil && match(sl.obj) {
			s.c.Invalidate(k)
			n++
		}
	}
	return n
}

// Len is the number of slots (objects, and the Vary records of varying responses).
func (s *Store) Len() int { return s.c.EstimatedSize() }

// varyNames lists a response's Vary field names, canonical, sorted and
// without duplicates; nil when it has none.
func varyNames(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			f = http.CanonicalHeaderKey(strings.TrimSpace(f))
			if f == "" {
				continue
			}
			dup := false
			for _, o := range out {
				dup = dup || o == f
			}
			if !dup {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return out
}

// secondaryKey appends the normalised values of req's vary fields to key:
// all the field's lines joined by ",", spaces around commas and runs of
// white space collapsed, lower-cased (the fields Vary usually names,
// Accept-Encoding, Accept-Language, Accept, compare case-insensitively).
func secondaryKey(key string, names []string, req http.Header) string {
	var b strings.Builder
	b.WriteString(key)
	for _, n := range names {
		b.WriteString("\x01")
		b.WriteString(n)
		b.WriteByte('=')
		first := true
		for _, v := range req.Values(n) {
			for _, part := range strings.Split(v, ",") {
				part = strings.Join(strings.Fields(part), " ")
				if part == "" {
					continue
				}
				if !first {
					b.WriteByte(',')
				}
				first = false
				b.WriteString(strings.ToLower(part))
			}
		}
	}
	return b.String()
}
