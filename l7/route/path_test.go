package route

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizePath(t *testing.T) {
	const (
		ok  = ""
		bad = "bad"
		enc = "encoded"
	)
	tests := []struct {
		name   string
		raw    string
		policy SlashPolicy
		want   string
		err    string // ok, bad (ErrBadPath only) or enc (also ErrEncodedSlash)
	}{
		{"already normal: root", "/", 0, "/", ok},
		{"already normal: segments", "/v1/users/42", 0, "/v1/users/42", ok},
		{"already normal: trailing slash", "/a/b/", 0, "/a/b/", ok},
		{"already normal: sub-delims", "/a:b@c!$&'()*+,;=", 0, "/a:b@c!$&'()*+,;=", ok},
		{"already normal: kept escape", "/a%20b/%C3%A9", 0, "/a%20b/%C3%A9", ok},
		{"already normal: dots inside names", "/.a/a./.../a..b", 0, "/.a/a./.../a..b", ok},
		{"dot segment: single", "/a/./b", 0, "/a/b", ok},
		{"dot segment: parent", "/a/b/../c", 0, "/a/c", ok},
		{"dot segment: above root", "/../../a", 0, "/a", ok},
		{"dot segment: trailing dot keeps slash", "/a/.", 0, "/a/", ok},
		{"dot segment: trailing parent keeps slash", "/a/b/..", 0, "/a/", ok},
		{"dot segment: parent to root", "/a/..", 0, "/", ok},
		{"dot segment: only parent", "/..", 0, "/", ok},
		{"dot segment: only dot", "/.", 0, "/", ok},
		{"dot segment: parent then slash", "/a/../", 0, "/", ok},
		{"encoded dots: parent", "/a/%2e%2e/b", 0, "/b", ok},
		{"encoded dots: upper", "/%2E%2E/x", 0, "/x", ok},
		{"encoded dots: mixed", "/a/.%2e/b", 0, "/b", ok},
		{"encoded dots: single", "/a/%2e/b", 0, "/a/b", ok},
		{"encoded dots: in a name", "/a%2eb", 0, "/a.b", ok},
		{"duplicate slashes", "//a///b", 0, "/a/b", ok},
		{"duplicate slashes: trailing", "/a//", 0, "/a/", ok},
		{"duplicate slashes: only", "///", 0, "/", ok},
		{"unreserved decoding", "/%7Euser/%41%62-%5F%30", 0, "/~user/Ab-_0", ok},
		{"hex upper-casing", "/a%3ab%c3%a9", 0, "/a%3Ab%C3%A9", ok},
		{"hex upper-casing: percent stays", "/100%25", 0, "/100%25", ok},
		{"%2F rejected", "/a%2Fb", RejectEncodedSlashes, "", enc},
		{"%2f rejected", "/a%2fb", RejectEncodedSlashes, "", enc},
		{"%2F decoded", "/a%2Fb", DecodeEncodedSlashes, "/a/b", ok},
		{"%2f decoded, collapses", "/a%2f%2F/b", DecodeEncodedSlashes, "/a/b", ok},
		{"%2F decoded: trailing", "/a%2F", DecodeEncodedSlashes, "/a/", ok},
		{"%2F decoded: dot trick", "/admin/..%2Fpublic", DecodeEncodedSlashes, "/public", ok},
		{"%5C rejected", "/a%5Cb", RejectEncodedSlashes, "", enc},
		{"%5c rejected under decode too", "/a%5cb", DecodeEncodedSlashes, "", enc},
		{"bad escape: one digit", "/a%4", 0, "", bad},
		{"bad escape: none", "/a%", 0, "", bad},
		{"bad escape: not hex", "/a%zz", 0, "", bad},
		{"bad escape: %00", "/a%00", 0, "", bad},
		{"bad escape: double percent", "/%%41", 0, "", bad},
		{"control byte: NUL", "/a\x00", 0, "", bad},
		{"control byte: tab", "/a\tb", 0, "", bad},
		{"control byte: DEL", "/a\x7f", 0, "", bad},
		{"space", "/a b", 0, "", bad},
		{"backslash", "/a\\b", 0, "", bad},
		{"fragment", "/a#b", 0, "", bad},
		{"query", "/a?b", 0, "", bad},
		{"brackets and quotes", "/a<b>\"", 0, "", bad},
		{"braces, pipe, caret, backtick", "/{|}^`", 0, "", bad},
		{"non-ASCII", "/caf\xc3\xa9", 0, "", bad},
		{"non-origin-form: empty", "", 0, "", bad},
		{"non-origin-form: relative", "a/b", 0, "", bad},
		{"non-origin-form: absolute URI", "http://x/a", 0, "", bad},
		{"non-origin-form: asterisk", "*", 0, "", bad},
		{"bad byte after needed rewrite", "//a/\x01", 0, "", bad},
		{"long path, heap buffer", strings.Repeat("/a", 200) + "/../b/", 0, strings.Repeat("/a", 199) + "/b/", ok},
		{"long path above root", strings.Repeat("/a", 200) + strings.Repeat("/..", 300), 0, "/", ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizePath(tt.raw, tt.policy)
			switch {
			case tt.err == ok && err != nil:
				t.Fatalf("NormalizePath(%q) error: %v", tt.raw, err)
			case tt.err == ok && got != tt.want:
				t.Fatalf("NormalizePath(%q) = %q, want %q", tt.raw, got, tt.want)
			case tt.err != ok && err == nil:
				t.Fatalf("NormalizePath(%q) = %q, want an error", tt.raw, got)
			case tt.err != ok && !errors.Is(err, ErrBadPath):
				t.Fatalf("error %v does not wrap ErrBadPath", err)
			case tt.err != ok && errors.Is(err, ErrEncodedSlash) != (tt.err == enc):
				t.Fatalf("error %v: wraps ErrEncodedSlash = %v, want %v", err, errors.Is(err, ErrEncodedSlash), tt.err == enc)
			}
		})
	}
}

func TestNormalizePathErrorNamesOffset(t *testing.T) {
	_, err := NormalizePath("/ab\x01", 0)
	if err == nil || !strings.Contains(err.Error(), `'\x01' at offset 3`) {
		t.Fatalf("error %v does not name the byte and offset", err)
	}
	_, err = NormalizePath("/a/%2f", 0)
	if err == nil || !strings.Contains(err.Error(), `"%2f" at offset 3`) {
		t.Fatalf("error %v does not name the escape and offset", err)
	}
}

// TestPathTricks checks that encoded slashes and dots resolve exactly as the
// plain path they spell, or fail: never somewhere else.
func TestPathTricks(t *testing.T) {
	table := mustTable(t,
		rt("admin", "*", "/admin/{rest...}"),
		rt("public", "*", "/public/{rest...}"),
		rt("root", "*", "/{rest...}"),
	)
	tricks := []string{
		"/admin/..%2Fpublic", "/admin/..%2fpublic/x", "/public/%2e%2e/admin",
		"/public/%2E%2E/admin/", "/public/.%2e/admin", "/public/%2e./admin",
		"/public%2F..%2Fadmin", "/public/x/..%2F..%2Fadmin", "/%2e%2e/%2e%2e/admin",
		"/public//..//admin", "/public/%2e/../admin",
	}
	plain := strings.NewReplacer("%2F", "/", "%2f", "/", "%2E", ".", "%2e", ".")
	for _, trick := range tricks {
		for _, policy := range []SlashPolicy{RejectEncodedSlashes, DecodeEncodedSlashes} {
			t.Run(trick, func(t *testing.T) {
				want, err := NormalizePath(plain.Replace(trick), policy)
				if err != nil {
					t.Fatalf("plain form of %q: %v", trick, err)
				}
				got, err := NormalizePath(trick, policy)
				if err != nil {
					if !errors.Is(err, ErrEncodedSlash) || policy != RejectEncodedSlashes {
						t.Fatalf("policy %d: unexpected error %v", policy, err)
					}
					return
				}
				if got != want {
					t.Fatalf("policy %d: %q normalises to %q, its plain form to %q", policy, trick, got, want)
				}
				var a, b Match
				table.Lookup("x", "GET", got, &a)
				table.Lookup("x", "GET", want, &b)
				if a.Route != b.Route {
					t.Fatalf("policy %d: %q reaches route %d, its plain form %d", policy, trick, a.Route, b.Route)
				}
			})
		}
	}
}

func TestNormalizePathNormalDoesNotAllocate(t *testing.T) {
	for _, p := range []string{"/", "/v1/users/42/orders", "/static/css/site.css", "/a%20b/"} {
		allocs := testing.AllocsPerRun(100, func() {
			if got, err := NormalizePath(p, RejectEncodedSlashes); err != nil || got != p {
				t.Fatalf("NormalizePath(%q) = %q, %v", p, got, err)
			}
		})
		if allocs != 0 {
			t.Errorf("NormalizePath(%q) allocates %v times", p, allocs)
		}
	}
}

func TestNormalizeHost(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"already normal", "api.example.com", "api.example.com"},
		{"upper-case", "API.Example.COM", "api.example.com"},
		{"port", "api.example.com:8443", "api.example.com"},
		{"upper-case and port", "Api.Example.com:443", "api.example.com"},
		{"trailing dot", "api.example.com.", "api.example.com"},
		{"trailing dot and port", "api.example.com.:80", "api.example.com"},
		{"only one trailing dot", "a.com..", "a.com."},
		{"v6 with port", "[2001:DB8::1]:443", "[2001:db8::1]"},
		{"v6 without port", "[::1]", "[::1]"},
		{"bare v6", "2001:db8::1", "2001:db8::1"},
		{"v4 with port", "192.0.2.1:80", "192.0.2.1"},
		{"empty", "", ""},
		{"empty port", "a.com:", "a.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeHost(tt.in); got != tt.want {
				t.Fatalf("NormalizeHost(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	for _, h := range []string{"api.example.com", "api.example.com:443", "[::1]:80"} {
		if n := testing.AllocsPerRun(100, func() { NormalizeHost(h) }); n != 0 {
			t.Errorf("NormalizeHost(%q) allocates %v times", h, n)
		}
	}
}
