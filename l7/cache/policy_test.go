package cache

import (
	"net/http"
	"testing"
	"time"
)

func TestParseResponseCC(t *testing.T) {
	cases := []struct {
		in   string
		want ResponseCC
		err  bool
	}{
		{"", ResponseCC{}, false},
		{"no-store", ResponseCC{NoStore: true}, false},
		{"no-cache", ResponseCC{NoCache: true}, false},
		{`no-cache="Set-Cookie"`, ResponseCC{NoCache: true}, false},
		{"private", ResponseCC{Private: true}, false},
		{"public, max-age=60", ResponseCC{Public: true, MaxAge: time.Minute, HasMaxAge: true}, false},
		{"s-maxage=5", ResponseCC{SMaxAge: 5 * time.Second, HasSMaxAge: true, MustRevalidate: true}, false},
		{"must-revalidate", ResponseCC{MustRevalidate: true}, false},
		{"proxy-revalidate", ResponseCC{MustRevalidate: true}, false},
		{"max-age=1, stale-while-revalidate=2, stale-if-error=3", ResponseCC{MaxAge: time.Second, HasMaxAge: true, SWR: 2 * time.Second, HasSWR: true, SIE: 3 * time.Second, HasSIE: true}, false},
		{"max-age=99999999999", ResponseCC{MaxAge: maxDelta * time.Second, HasMaxAge: true}, false},
		{"max-age=abc", ResponseCC{}, true},
		{"max-age=", ResponseCC{}, true},
		{"=", ResponseCC{}, false}, // an empty element with an empty value: ignored
		{`max-age="30"`, ResponseCC{MaxAge: 30 * time.Second, HasMaxAge: true}, false},
		{`no-cache="a`, ResponseCC{}, true},
		{` , ,public,`, ResponseCC{Public: true}, false},
		{`MAX-AGE=5`, ResponseCC{MaxAge: 5 * time.Second, HasMaxAge: true}, false},
		{"max-age=-1", ResponseCC{}, true},
	}
	for _, c := range cases {
		got, err := ParseResponseCC(c.in)
		if (err != nil) != c.err {
			t.Errorf("%q: err %v, want err %v", c.in, err, c.err)
			continue
		}
		if !c.err && got != c.want {
			t.Errorf("%q: got %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestStorable(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		name   string
		method string
		status int
		hdr    http.Header
		cc     string
		ok     bool
		why    string
	}{
		{"get 200", "GET", 200, h(), "", true, ""},
		{"head 200", "HEAD", 200, h(), "", true, ""},
		{"post", "POST", 200, h(), "", false, "method"},
		{"500", "GET", 500, h(), "", false, "status"},
		{"206", "GET", 206, h(), "", false, "status"},
		{"404", "GET", 404, h(), "", true, ""},
		{"no-store", "GET", 200, h(), "no-store", false, "no-store"},
		{"private", "GET", 200, h(), "private", false, "private"},
		{"no-cache stores", "GET", 200, h(), "no-cache", true, ""},
		{"set-cookie", "GET", 200, h("Set-Cookie", "a=b"), "", false, "set-cookie"},
		{"vary star", "GET", 200, h("Vary", "Accept, *"), "", false, "vary-star"},
		{"vary", "GET", 200, h("Vary", "Accept-Encoding"), "", true, ""},
	}
	for _, c := range cases {
		cc, err := ParseResponseCC(c.cc)
		if err != nil {
			t.Fatal(err)
		}
		ok, why := Storable(c.method, c.status, c.hdr, cc, false)
		if ok != c.ok || why != c.why {
			t.Errorf("%s: got %v %q, want %v %q", c.name, ok, why, c.ok, c.why)
		}
	}
}

func TestLifetime(t *testing.T) {
	date := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exp := http.Header{"Expires": {date.Add(30 * time.Second).Format(http.TimeFormat)}}
	cases := []struct {
		name string
		cc   string
		hdr  http.Header
		want time.Duration
	}{
		{"default", "", http.Header{}, 7 * time.Second},
		{"max-age", "max-age=10", exp, 10 * time.Second},
		{"s-maxage wins", "max-age=10, s-maxage=20", exp, 20 * time.Second},
		{"expires", "", exp, 30 * time.Second},
		{"bad expires", "", http.Header{"Expires": {"0"}}, 0},
		{"past expires", "", http.Header{"Expires": {date.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
	}
	for _, c := range cases {
		cc, _ := ParseResponseCC(c.cc)
		if got := Lifetime(cc, c.hdr, date, 7*time.Second); got != c.want {
			t.Errorf("%s: got %v want %v", c.name, got, c.want)
		}
	}
}

func TestParseRequestCC(t *testing.T) {
	cc, err := ParseRequestCC(http.Header{"Pragma": {"no-cache"}})
	if err != nil || !cc.NoCache {
		t.Fatalf("pragma: %+v %v", cc, err)
	}
	cc, err = ParseRequestCC(http.Header{"Cache-Control": {"no-store, max-age=0"}})
	if err != nil || !cc.NoStore || !cc.HasMaxAge || cc.MaxAge != 0 {
		t.Fatalf("no-store: %+v %v", cc, err)
	}
	if _, err := ParseRequestCC(http.Header{"Cache-Control": {"max-age=x"}}); err == nil {
		t.Fatal("bad max-age accepted")
	}
}

func FuzzParseResponseCC(f *testing.F) {
	for _, s := range []string{"", "no-store", "max-age=1, s-maxage=2", `no-cache="a, b"`, "max-age=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cc, err := ParseResponseCC(s)
		if err == nil && (cc.MaxAge < 0 || cc.SMaxAge < 0) {
			t.Fatalf("negative age from %q", s)
		}
	})
}
