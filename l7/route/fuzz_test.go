package route

import (
	"errors"
	"strings"
	"testing"
)

func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"/", "/a/b/", "//a///b", "/a/./b/../c", "/%2e%2E/x", "/a%2Fb", "/a%5c", "/%7e%41",
		"/a%3ab", "/a%", "/a%4", "/%00", "/a b", "a", "", "/..", "/a/..", "/.%2e/", "/admin/..%2Fpublic",
		"/" + strings.Repeat("a/", 200) + strings.Repeat("../", 201),
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, raw string, decode bool) {
		policy := RejectEncodedSlashes
		if decode {
			policy = DecodeEncodedSlashes
		}
		out, err := NormalizePath(raw, policy)
		if err != nil {
			if !errors.Is(err, ErrBadPath) {
				t.Fatalf("error %v does not wrap ErrBadPath", err)
			}
			if out != "" {
				t.Fatalf("error %v with output %q", err, out)
			}
			return
		}
		if again, err := NormalizePath(out, policy); err != nil || again != out {
			t.Fatalf("%q -> %q is not a fixed point: %q, %v", raw, out, again, err)
		}
		if again, err := NormalizePath(out, RejectEncodedSlashes); err != nil || again != out {
			t.Fatalf("%q -> %q is not normal under the reject policy: %q, %v", raw, out, again, err)
		}
		if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") || len(out) > len(raw) {
			t.Fatalf("%q -> %q: not a normal path", raw, out)
		}
		for _, seg := range strings.Split(out, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q -> %q keeps a dot segment", raw, out)
			}
		}
		if up := strings.ToUpper(out); strings.Contains(up, "%2F") || strings.Contains(up, "%5C") {
			t.Fatalf("%q -> %q keeps an encoded slash", raw, out)
		}
		if policy == RejectEncodedSlashes {
			// Whatever the reject policy accepts, the decode policy
			// normalises the same way.
			if d, err := NormalizePath(raw, DecodeEncodedSlashes); err != nil || d != out {
				t.Fatalf("%q: reject gives %q, decode %q, %v", raw, out, d, err)
			}
		}
	})
}

func FuzzLookup(f *testing.F) {
	table := mustTable(f, precedenceRoutes...)
	for _, s := range []string{"/users/me", "/users/42/x/", "/t/1/x/2", "/files/", "/a/b/c", "/dir/", "/", "", "x", "/any"} {
		f.Add("p.test", "GET", s)
		f.Add("a.eu.example.com", "PATCH", s)
	}
	f.Fuzz(func(t *testing.T, host, method, path string) {
		var m Match
		table.Lookup(host, method, path, &m) // any input: must not panic
		switch {
		case m.Status == 200 && (m.Route < 0 || int(m.Route) >= table.Len()):
			t.Fatalf("route %d out of range", m.Route)
		case m.Status != 200 && m.Route != -1, m.Status != 200 && m.Status != 404 && m.Status != 405:
			t.Fatalf("inconsistent match %+v", m)
		case m.NParams < 0 || m.NParams > len(m.Params):
			t.Fatalf("NParams %d", m.NParams)
		case m.Status == 200 && m.NParams != len(table.ParamNames(m.Route)):
			t.Fatalf("route %d captured %d params for names %q", m.Route, m.NParams, table.ParamNames(m.Route))
		case m.Status == 405 && table.Allow(host, path) == "":
			t.Fatal("405 with an empty Allow")
		}
		for _, p := range m.Params[:m.NParams] {
			if p == "" || !strings.Contains(path, p) {
				t.Fatalf("param %q is not a substring of %q", p, path)
			}
		}
		if norm, err := NormalizePath(path, RejectEncodedSlashes); err == nil && norm == path {
			checkAgainstRef(t, table, precedenceRoutes, host, method, path)
		}
	})
}
