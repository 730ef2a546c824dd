// Package cache holds the proxy's shared HTTP response cache: the RFC 9111
// storage and freshness rules, the cache key, and the byte-bounded store.
// It has no HTTP server code; the cache stage in l7/stage drives it.
package cache

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ResponseCC is the subset of a response's Cache-Control that a shared
// cache acts on (RFC 9111 section 5.2.2).
type ResponseCC struct {
	NoStore        bool
	NoCache        bool // unqualified no-cache: store, but revalidate on every use
	Private        bool // unqualified private: a shared cache must not store
	MustRevalidate bool // must-revalidate or proxy-revalidate: never serve stale
	Public         bool
	MaxAge         time.Duration
	HasMaxAge      bool
	SMaxAge        time.Duration
	HasSMaxAge     bool
	SWR            time.Duration // stale-while-revalidate (RFC 5861)
	HasSWR         bool
	SIE            time.Duration // stale-if-error (RFC 5861)
	HasSIE         bool
}

// RequestCC is the subset of a request's Cache-Control the cache acts on.
type RequestCC struct {
	NoStore   bool
	NoCache   bool
	MaxAge    time.Duration
	HasMaxAge bool
}

// ParseResponseCC parses a response Cache-Control field value. A value that
// does not parse is reported as an error; callers treat it as no-store, the
// conservative reading.
func ParseResponseCC(v string) (ResponseCC, error) {
	var cc ResponseCC
	if v == "" {
		return cc, nil
	}
	toks, err := directives(v)
	if err != nil {
		return cc, err
	}
	for _, t := range toks {
		switch strings.ToLower(t.Name) {
		case "no-store":
			cc.NoStore = true
		case "no-cache":
			// A qualified no-cache (field names) is treated as unqualified:
			// stricter, and RFC 9111 5.2.2.4 allows it.
			cc.NoCache = true
		case "private":
			cc.Private = true
		case "must-revalidate", "proxy-revalidate":
			cc.MustRevalidate = true
		case "public":
			cc.Public = true
		case "max-age":
			d, err := seconds(t.Name, t.Value)
			if err != nil {
				return cc, err
			}
			cc.MaxAge, cc.HasMaxAge = d, true
		case "s-maxage":
			d, err := seconds(t.Name, t.Value)
			if err != nil {
				return cc, err
			}
			cc.SMaxAge, cc.HasSMaxAge = d, true
			// RFC 9111 5.2.2.10: s-maxage implies proxy-revalidate.
			cc.MustRevalidate = true
		case "stale-while-revalidate":
			d, err := seconds(t.Name, t.Value)
			if err != nil {
				return cc, err
			}
			cc.SWR, cc.HasSWR = d, true
		case "stale-if-error":
			d, err := seconds(t.Name, t.Value)
			if err != nil {
				return cc, err
			}
			cc.SIE, cc.HasSIE = d, true
		}
	}
	return cc, nil
}

// ParseRequestCC parses a request Cache-Control (and Pragma: no-cache when
// Cache-Control is absent, RFC 9111 5.4).
func ParseRequestCC(h http.Header) (RequestCC, error) {
	var cc RequestCC
	v := strings.Join(h.Values("Cache-Control"), ",")
	if v == "" {
		if strings.EqualFold(strings.TrimSpace(h.Get("Pragma")), "no-cache") {
			cc.NoCache = true
		}
		return cc, nil
	}
	toks, err := directives(v)
	if err != nil {
		return cc, fmt.Errorf("request %w", err)
	}
	for _, t := range toks {
		switch strings.ToLower(t.Name) {
		case "no-store":
			cc.NoStore = true
		case "no-cache":
			cc.NoCache = true
		case "max-age":
			d, err := seconds(t.Name, t.Value)
			if err != nil {
				return cc, err
			}
			cc.MaxAge, cc.HasMaxAge = d, true
		}
	}
	return cc, nil
}

// directive is one Cache-Control directive: a name and its value, a
// quoted-string value unquoted.
type directive struct{ Name, Value string }

// errCacheControl marks a Cache-Control field value that does not parse.
var errCacheControl = errors.New("malformed cache-control")

// directives splits a Cache-Control field value (RFC 9111 5.2: a list of
// token [ "=" ( token / quoted-string ) ]). Hand-written: the library
// tried first (github.com/lestrrat-go/httpcc v1.0.1) panics on "max-age="
// (an index out of range its fuzz target here found), and an upstream's
// header must never crash the proxy.
func directives(v string) ([]directive, error) {
	var out []directive
	for i := 0; i < len(v); {
		j := i
		for j < len(v) && v[j] != ',' && v[j] != '=' {
			j++
		}
		d := directive{Name: strings.TrimSpace(v[i:j])}
		i = j
		if i < len(v) && v[i] == '=' {
			i++
			for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
				i++
			}
			if i < len(v) && v[i] == '"' {
				var b strings.Builder
				i++
				closed := false
				for i < len(v) {
					c := v[i]
					i++
					if c == '\\' && i < len(v) {
						b.WriteByte(v[i])
						i++
						continue
					}
					if c == '"' {
						closed = true
						break
					}
					b.WriteByte(c)
				}
				if !closed {
					return nil, fmt.Errorf("%w %q: unterminated quoted string", errCacheControl, v)
				}
				d.Value = b.String()
				for i < len(v) && v[i] != ',' {
					if v[i] != ' ' && v[i] != '\t' {
						return nil, fmt.Errorf("%w %q: bytes after a quoted string", errCacheControl, v)
					}
					i++
				}
			} else {
				j := i
				for j < len(v) && v[j] != ',' {
					j++
				}
				d.Value = strings.TrimSpace(v[i:j])
				i = j
			}
		}
		if i < len(v) {
			i++ // the comma
		}
		if d.Name == "" {
			if d.Value != "" {
				return nil, fmt.Errorf("%w %q: a value without a directive name", errCacheControl, v)
			}
			continue // empty list elements are allowed (RFC 9110 5.6.1)
		}
		out = append(out, d)
	}
	return out, nil
}

// maxDelta caps delta-seconds at 2^31 as RFC 9111 1.2.2 says.
const maxDelta = 1 << 31

func seconds(name, v string) (time.Duration, error) {
	v = strings.Trim(v, `"`)
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cache-control %s=%q: %w", name, v, err)
	}
	if n > maxDelta {
		n = maxDelta
	}
	return time.Duration(n) * time.Second, nil
}

// Storable reports whether a shared cache may store the response to a
// request with method and status, and if not, why (for Cache-Status).
func Storable(method string, status int, h http.Header, cc ResponseCC, authenticated bool) (bool, string) {
	if method != http.MethodGet && method != http.MethodHead {
		return false, "method"
	}
	switch status {
	case 200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501:
	default:
		return false, "status"
	}
	if status == 206 {
		return false, "status" // range responses are not combined here
	}
	if cc.NoStore {
		return false, "no-store"
	}
	if cc.Private {
		return false, "private"
	}
	if len(h.Values("Set-Cookie")) > 0 {
		return false, "set-cookie"
	}
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) == "*" {
				return false, "vary-star"
			}
		}
	}
	// RFC 9111 3.5: a response to an authenticated request is stored by a
	// shared cache only when it says so explicitly. On routes whose cache is
	// keyed by tenant the cache is not shared between tenants, so the route's
	// own config makes that choice; see Key.
	_ = authenticated
	return true, ""
}

// Lifetime is the freshness lifetime of a response (RFC 9111 4.2.1) with
// defaultTTL as the heuristic when the response gives none. date is the
// response's Date (or the receive time when absent).
func Lifetime(cc ResponseCC, h http.Header, date time.Time, defaultTTL time.Duration) time.Duration {
	if cc.HasSMaxAge {
		return cc.SMaxAge
	}
	if cc.HasMaxAge {
		return cc.MaxAge
	}
	if e := h.Get("Expires"); e != "" {
		t, err := http.ParseTime(e)
		if err != nil {
			return 0 // invalid Expires means already expired (RFC 9111 5.3)
		}
		if d := t.Sub(date); d > 0 {
			return d
		}
		return 0
	}
	return defaultTTL
}
