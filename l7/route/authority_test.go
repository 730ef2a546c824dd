package route

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAuthority(t *testing.T) {
	for _, tc := range []struct {
		in, host, authority string
		def                 int
	}{
		{"api.example.com", "api.example.com", "api.example.com", 443},
		{"API.Example.COM.", "api.example.com", "api.example.com", 443},
		{"api.example.com:8443", "api.example.com", "api.example.com:8443", 443},
		{"api.example.com:443", "api.example.com", "api.example.com", 443},
		{"api.example.com:80", "api.example.com", "api.example.com:80", 443},
		{"api.example.com:", "api.example.com", "api.example.com", 443},
		{"api.example.com:08443", "api.example.com", "api.example.com:8443", 443},
		{"Api.Example.com:8443", "api.example.com", "api.example.com:8443", 443},
		{"127.0.0.1:9000", "127.0.0.1", "127.0.0.1:9000", 80},
		{"[::1]:443", "[::1]", "[::1]", 443},
		{"[::1]:8443", "[::1]", "[::1]:8443", 443},
		{"[2001:DB8::1]", "[2001:db8::1]", "[2001:db8::1]", 443},
		{"[::ffff:1.2.3.4]:", "[::ffff:1.2.3.4]", "[::ffff:1.2.3.4]", 80},
		{"a_b~c-d", "a_b~c-d", "a_b~c-d", 80},
		{"", "", "", 80},
	} {
		h, a, err := ParseAuthority(tc.in, tc.def)
		if err != nil || h != tc.host || a != tc.authority {
			t.Errorf("ParseAuthority(%q, %d) = %q, %q, %v; want %q, %q", tc.in, tc.def, h, a, err, tc.host, tc.authority)
		}
	}
	for _, in := range []string{
		"api.example.com:@evil.example", "user@api.example.com", "api.example.com:8x", "api.example.com:65536",
		"api.example.com:123456", "api.example.com:-1", ":443", ":", "::1", "[::1", "[::1]x", "[::1]:x",
		"[fe80::1%25eth0]", "[v1.abc]", "[1.2.3.4]", "a,b.example", "a;b", "a b", "a%2eb", "a\x00b",
		"ex\xc3\xa4mple.com", "a/b", "a\\b", "a?b", "a#b", "a:1:2", "[]",
		"a..", "a..b", ".a", ".", "..", ".:80",
	} {
		h, a, err := ParseAuthority(in, 443)
		if !errors.Is(err, ErrBadHost) || h != "" || a != "" {
			t.Errorf("ParseAuthority(%q) = %q, %q, %v; want an ErrBadHost", in, h, a, err)
		}
	}
}

func TestParseAuthorityNormalDoesNotAllocate(t *testing.T) {
	for _, in := range []string{"api.example.com", "api.example.com:8443", "[::1]:8443"} {
		if n := testing.AllocsPerRun(100, func() { _, _, _ = ParseAuthority(in, 443) }); n != 0 {
			t.Errorf("ParseAuthority(%q): %v allocations", in, n)
		}
	}
}

func TestCheckQuery(t *testing.T) {
	for _, q := range []string{"", "a=1&b=2", "a=%20b", "x=/p?q:@!$&'()*+,;=-._~", "%00", "a=%2F%2f", "?", "=="} {
		if err := CheckQuery(q); err != nil {
			t.Errorf("CheckQuery(%q): %v", q, err)
		}
	}
	for _, q := range []string{"a HTTP/1.0", "a\tb", "a\rb", "a\nb", "a\x00", "a\x7f", "\xc3\xa4", "a#b", `a"b`,
		"a<b", "a>b", "a[]=1", `a\b`, "a^b", "a`b", "a{b}", "a|b", "%", "%4", "%zz", "a=%g0"} {
		if err := CheckQuery(q); !errors.Is(err, ErrBadQuery) {
			t.Errorf("CheckQuery(%q) = %v; want an ErrBadQuery", q, err)
		}
	}
}

// FuzzParseAuthority: whatever is accepted has a normal form that is a
// fixed point, whose host is in NormalizeHost's form, with only digits
// after the host; and it never holds a byte that could split a header or
// a list.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"a.example:8443", "A.EXAMPLE.:", "[::1]:443", "[::1]", "a:@b", "a,b", ":1", "x:0443", "", "0.."} {
		f.Add(s, 443)
	}
	f.Fuzz(func(t *testing.T, s string, def int) {
		host, auth, err := ParseAuthority(s, def)
		if err != nil {
			if !errors.Is(err, ErrBadHost) || host != "" || auth != "" {
				t.Fatalf("%q: error %v with %q, %q", s, err, host, auth)
			}
			return
		}
		if NormalizeHost(host) != host {
			t.Fatalf("%q: host %q is not in normal form", s, host)
		}
		if !strings.HasPrefix(auth, host) {
			t.Fatalf("%q: authority %q does not start with host %q", s, auth, host)
		}
		if rest := auth[len(host):]; rest != "" {
			if rest[0] != ':' || len(rest) < 2 || strings.Trim(rest[1:], "0123456789") != "" {
				t.Fatalf("%q: authority %q has %q after the host", s, auth, rest)
			}
		}
		if strings.ContainsAny(auth, ",; \t\r\n@/?#%\\") {
			t.Fatalf("%q: authority %q holds a separator", s, auth)
		}
		h2, a2, err := ParseAuthority(auth, def)
		if err != nil || h2 != host || a2 != auth {
			t.Fatalf("%q -> %q, %q is not a fixed point: %q, %q, %v", s, host, auth, h2, a2, err)
		}
	})
}

func FuzzCheckQuery(f *testing.F) {
	for _, s := range []string{"a=1", "a HTTP/1.0", "%4", "%41", "a#b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		err := CheckQuery(q)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("%q: %v does not wrap ErrBadQuery", q, err)
			}
			return
		}
		for i := 0; i < len(q); i++ {
			if c := q[i]; c <= ' ' || c >= 0x7f || c == '#' {
				t.Fatalf("%q accepted with byte %q", q, c)
			}
		}
		for i := strings.IndexByte(q, '%'); i >= 0; i = strings.IndexByte(q, '%') {
			if len(q) < i+3 || !isHex(q[i+1]) || !isHex(q[i+2]) {
				t.Fatalf("accepted a malformed escape at %q", q[i:])
			}
			q = q[i+3:]
		}
	})
}

func BenchmarkParseAuthority(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = ParseAuthority("api.example.com:8443", 443)
	}
}

func BenchmarkCheckQuery(b *testing.B) {
	q := "page=2&sort=created_at&filter=status%3Aopen&fields=id,name,owner"
	b.ReportAllocs()
	for b.Loop() {
		_ = CheckQuery(q)
	}
}
