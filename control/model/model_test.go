package model

import (
	"net/url"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]snapshot.Version{"0.0": {}, "1.7": {Epoch: 1, Sequence: 7}, "12.345": {Epoch: 12, Sequence: 345}} {
		if v, err := ParseVersion(in); err != nil || v != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, v, err)
		}
		if want.String() != in {
			t.Errorf("String of %v = %q", want, want.String())
		}
	}
	for _, in := range []string{"", "1", "1.", ".1", "01.1", "1.01", "1.2.3", "-1.2", "1.+2", "a.b", "18446744073709551616.1"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) accepted", in)
		}
	}
}

func TestRevisionID(t *testing.T) {
	if RevisionID(42) != "r42" {
		t.Fatal(RevisionID(42))
	}
	for _, bad := range []string{"", "r", "r0", "r01", "x1", "r-1", "r+1", "r1x"} {
		if _, err := ParseRevisionID(bad); err == nil {
			t.Errorf("ParseRevisionID(%q) accepted", bad)
		}
	}
}

func TestWatchQuery(t *testing.T) {
	q := WatchQuery{Identity: Identity{NodeID: "edge-1", Region: "eu", Zone: "eu-1a", Cohort: "canary"},
		Version: snapshot.Version{Epoch: 2, Sequence: 9}, Sequence: 4, Timeout: 25 * time.Second}
	got, err := ParseWatchQuery(q.Values())
	if err != nil || got != q {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, raw := range []string{
		"", "region=eu", "node=a&node=b", "node=a&bogus=1", "node=a%20b", "node=a&version=1", "node=a&sequence=-1",
		"node=a&timeout=1h", "node=a&timeout=-1s", "node=a&zone=" + string(make([]byte, 65)),
	} {
		v, _ := url.ParseQuery(raw)
		if _, err := ParseWatchQuery(v); err == nil {
			t.Errorf("ParseWatchQuery(%q) accepted", raw)
		}
	}
}

// FuzzParseWatchQuery: any query either fails or round-trips.
func FuzzParseWatchQuery(f *testing.F) {
	f.Add("node=edge-1&region=eu&zone=eu-1a&cohort=canary&version=1.2&sequence=3&timeout=30s")
	f.Add("node=a&version=0.0")
	f.Add("node=%00&timeout=1e9ns")
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseWatchQuery(v)
		if err != nil {
			return
		}
		if q.Identity.Validate() != nil || q.Timeout < 0 || q.Timeout > MaxWatchTimeout {
			t.Fatalf("accepted a bad query %+v", q)
		}
		again, err := ParseWatchQuery(q.Values())
		if err != nil || again != q {
			t.Fatalf("round trip of %+v: %+v, %v", q, again, err)
		}
	})
}

// FuzzParseVersion: what parses prints back the same.
func FuzzParseVersion(f *testing.F) {
	f.Add("1.2")
	f.Add("0.0")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err == nil && v.String() != s {
			t.Fatalf("%q parsed as %v", s, v)
		}
	})
}
