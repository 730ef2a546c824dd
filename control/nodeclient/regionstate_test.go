package nodeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAgentAnnouncing(t *testing.T) {
	status := `{"time":"2026-12-02T05:00:00Z","vips":[
	  {"prefix":"203.0.113.0/24","state":"announced"},
	  {"prefix":"192.0.2.7/24","state":"held"},
	  {"prefix":"198.51.100.0/24","state":"draining"},
	  {"prefix":"2001:db8::/48","state":"withdrawn"},
	  {"prefix":"203.0.113.0/24","state":"announced"}]}`
	off := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/anycast/status" {
			http.NotFound(w, r)
			return
		}
		if off {
			http.Error(w, "anycast is off on this agent", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(status))
	}))
	defer srv.Close()
	got, err := AgentAnnouncing(context.Background(), nil, srv.URL+"/")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "192.0.2.0/24,203.0.113.0/24" {
		t.Fatalf("announcing = %v", got)
	}
	off = true
	if got, err := AgentAnnouncing(context.Background(), nil, srv.URL); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("anycast off: %v, %v; want an empty list", got, err)
	}
	for _, bad := range []string{`{"vips":[{"prefix":"nope","state":"announced"}]}`, `{"vips":`} {
		if _, err := parseAnnouncing(strings.NewReader(bad)); err == nil {
			t.Errorf("parseAnnouncing(%q) accepted", bad)
		}
	}
	if _, err := AgentAnnouncing(context.Background(), nil, "http://127.0.0.1:1"); err == nil {
		t.Fatal("an unreachable agent gave no error")
	}
}

func FuzzParseAnnouncing(f *testing.F) {
	f.Add(`{"vips":[{"prefix":"203.0.113.0/24","state":"announced"}]}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseAnnouncing(strings.NewReader(s))
		if err != nil {
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i-1] >= got[i] {
				t.Fatalf("not sorted and unique: %v", got)
			}
		}
	})
}
