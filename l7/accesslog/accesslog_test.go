package accesslog

import (
	"strings"
	"testing"
	"time"
)

func TestTokenBucket(t *testing.T) {
	b := newTokenBucket(10) // 10/s, burst 10
	const ms = int64(time.Millisecond)
	now := int64(5 * time.Second)
	for i := 0; i < 10; i++ {
		if !b.allow(now) {
			t.Fatalf("burst token %d refused", i)
		}
	}
	if b.allow(now) {
		t.Fatal("11th token in the same instant allowed")
	}
	if b.allow(now + 50*ms) {
		t.Fatal("a token before its interval allowed")
	}
	if !b.allow(now+100*ms) || b.allow(now+100*ms) {
		t.Fatal("want exactly one token after one interval")
	}
	later := now + int64(10*time.Second) // refilled to the burst, not beyond
	got := 0
	for b.allow(later) {
		got++
	}
	if got != 10 {
		t.Fatalf("%d tokens after a long pause, want the burst of 10", got)
	}
}

func TestRedactQuery(t *testing.T) {
	names := map[string]struct{}{"token": {}, "a b": {}}
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"x=1", "x=1"},
		{"token=abc", "token=[redacted]"},
		{"token", "token"},
		{"token=", "token=[redacted]"},
		{"x=1&token=abc&y=2", "x=1&token=[redacted]&y=2"},
		{"x=1;token=abc", "x=1;token=[redacted]"},
		{"to%6Ben=abc&tok%65n=d", "to%6Ben=[redacted]&tok%65n=[redacted]"},
		{"a+b=1&a%20b=2", "a+b=[redacted]&a%20b=[redacted]"},
		{"token=a=b&&token=c", "token=[redacted]&&token=[redacted]"},
		{"Token=abc&tokens=x", "Token=abc&tokens=x"},
		{"tok%zzen=1", "tok%zzen=1"},
	} {
		if got := redactQuery(c.in, names); got != c.want {
			t.Errorf("redactQuery(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if q := "token=abc"; redactQuery(q, nil) != q {
		t.Error("no names must leave the query alone")
	}
}

// telSplitQuery splits on '&' and ';', returning segments and separators.
func telSplitQuery(q string) (segs []string, seps string) {
	start := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '&' || q[i] == ';' {
			segs = append(segs, q[start:i])
			seps += q[i : i+1]
			start = i + 1
		}
	}
	return append(segs, q[start:]), seps
}

// FuzzRedactQuery: the query redaction takes untrusted input; it keeps
// every byte except the values of the named parameters, which become
// "[redacted]".
func FuzzRedactQuery(f *testing.F) {
	for _, s := range []string{"", "token=abc", "x=1&token=abc;y=%zz", "tok%65n=1&&=&token", "a+b=%41&%=%%"} {
		f.Add(s, "token")
	}
	f.Add("a%20b=1", "a b")
	f.Fuzz(func(t *testing.T, q, name string) {
		got := redactQuery(q, map[string]struct{}{name: {}})
		inSegs, inSeps := telSplitQuery(q)
		outSegs, outSeps := telSplitQuery(got)
		if len(inSegs) != len(outSegs) || inSeps != outSeps {
			t.Fatalf("redactQuery(%q) = %q changed the parameter structure", q, got)
		}
		for i, seg := range inSegs {
			k, _, hasValue := strings.Cut(seg, "=")
			match := hasValue && (k == name || lenientUnescape(k) == name)
			want := seg
			if match {
				want = k + "=" + redacted
			}
			if outSegs[i] != want {
				t.Fatalf("redactQuery(%q) parameter %d = %q, want %q", q, i, outSegs[i], want)
			}
		}
	})
}
