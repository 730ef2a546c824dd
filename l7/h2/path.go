package h2

import (
	"net/url"
	"strings"
)

// parsePath fills u from a request's :path as url.ParseRequestURI would,
// without its allocation, for the common origin form: a path of bytes that
// need no escaping, an optional raw query. It reports false for anything
// else (escapes, "*", control bytes, other characters), which the caller
// hands to url.ParseRequestURI; FuzzParsePath holds the two to the same
// result. Measured: url.ParseRequestURI's URL was 140 of BenchmarkServeRaw's
// 1538 bytes a request (go test -bench ServeRaw -memprofile).
func parsePath(p string, u *url.URL) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	path, query, hasQuery := strings.Cut(p, "?")
	for i := 0; i < len(path); i++ {
		if !plainPathByte[path[i]] {
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c < ' ' || c == 0x7f {
			return false // url.ParseRequestURI refuses control bytes anywhere
		}
	}
	*u = url.URL{Path: path, RawQuery: query, ForceQuery: hasQuery && query == ""}
	return true
}

// plainPathByte: bytes net/url leaves unescaped in a path (so RawPath stays
// empty) and that need no unescaping: unreserved characters, '/', and the
// sub-delimiters it keeps.
var plainPathByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~/$&+,:;=@" {
		t[c] = true
	}
	return
}()
