package nodeclient

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rampart-edge/rampart/control/model"
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

// The agent's whole VIP picture: every state with its reason, the guard's
// verdict and the other sites it counts, the min-sites guard; text is
// made one bounded line; a state this client does not know is kept as
// unknown with the agent's word.
func TestAgentStatus(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	doc := fmt.Sprintf(`{"min_sites":1,"guard_source":"bgp","vips":[
	  {"prefix":"203.0.113.9/24","state":"held","since":"2026-12-03T09:00:00+01:00","reason":"guard holds it: 0 other sites","guard":{"active":true,"last":"hold: 0 < 1","other_sites":[]}},
	  {"prefix":"198.51.100.0/24","state":"draining","reason":"drained\nby operator","drained":"operator: maint","guard":{"other_sites":[{"site":2},{"site":3}]}},
	  {"prefix":"2001:db8::/48","state":"withdrawn","reason":%q},
	  {"prefix":"192.0.2.0/24","state":"announced","reason":"all inputs up"},
	  {"prefix":"192.0.2.128/25","state":"rebooting","reason":"new agent"}]}`, long)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(doc)) }))
	defer srv.Close()
	rep, err := AgentStatus(context.Background(), nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Announcing, ",") != "192.0.2.0/24,203.0.113.0/24" {
		t.Fatalf("announcing %v", rep.Announcing)
	}
	if g := rep.Guard; g == nil || g.MinSites != 1 || g.Source != "bgp" || g.Holding != 1 {
		t.Fatalf("guard %+v", rep.Guard)
	}
	var got []string
	for _, v := range rep.VIPs {
		got = append(got, v.Prefix+"="+v.State)
	}
	if strings.Join(got, ",") != "192.0.2.0/24=announced,192.0.2.128/25=unknown,198.51.100.0/24=draining,2001:db8::/48=withdrawn,203.0.113.0/24=held" {
		t.Fatalf("VIPs %v", got)
	}
	held, drain, wd, unk := rep.VIPs[4], rep.VIPs[2], rep.VIPs[3], rep.VIPs[1]
	if !held.GuardHolding || held.GuardVerdict != "hold: 0 < 1" || held.OtherSites != 0 || !held.Since.Equal(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)) || held.Since.Location() != time.UTC {
		t.Errorf("held VIP %+v", held)
	}
	if drain.Reason != "drained by operator" || drain.Drained != "operator: maint" || drain.OtherSites != 2 || drain.GuardHolding {
		t.Errorf("draining VIP %+v", drain)
	}
	if len(wd.Reason) > MaxAgentTextLen || !strings.HasSuffix(wd.Reason, "...") || !strings.HasPrefix(wd.Reason, "éé") {
		t.Errorf("long reason not clipped to %d bytes: %d bytes", MaxAgentTextLen, len(wd.Reason))
	}
	if unk.Reason != `agent state "rebooting": new agent` {
		t.Errorf("unknown state %+v", unk)
	}
	if _, err := parseAgentStatus(strings.NewReader(`{"vips":[{"prefix":"192.0.2.0/24","state":"announced"},{"prefix":"x","state":"held"}]}`)); err == nil || !strings.Contains(err.Error(), "vips[1]") {
		t.Errorf("a bad prefix: %v, want an error naming vips[1]", err)
	}
}

func FuzzParseAgentStatus(f *testing.F) {
	f.Add(`{"min_sites":1,"vips":[{"prefix":"203.0.113.0/24","state":"held","reason":"r","guard":{"active":true,"last":"x","other_sites":[{}]}}]}`)
	f.Add(`{"vips":[{"prefix":"::/0","state":"odd\u0000"}]}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, s string) {
		rep, err := parseAgentStatus(strings.NewReader(s))
		if err != nil {
			return
		}
		if rep.Guard == nil || rep.Guard.MinSites < 0 || len(rep.VIPs) > MaxAgentVIPs {
			t.Fatalf("guard %+v, %d VIPs", rep.Guard, len(rep.VIPs))
		}
		if !slices.IsSortedFunc(rep.VIPs, func(a, b model.VIPReport) int { return strings.Compare(a.Prefix, b.Prefix) }) {
			t.Fatalf("VIPs not sorted: %+v", rep.VIPs)
		}
		for _, v := range rep.VIPs {
			if !model.KnownVIPState(v.State) || v.OtherSites < 0 {
				t.Fatalf("VIP %+v", v)
			}
			for _, txt := range []string{v.Reason, v.Drained, v.GuardVerdict} {
				if len(txt) > MaxAgentTextLen || strings.ContainsFunc(txt, func(r rune) bool { return r < 0x20 || r == 0x7f }) || !utf8.ValidString(txt) {
					t.Fatalf("text %q is not one bounded line", txt)
				}
			}
		}
	})
}
