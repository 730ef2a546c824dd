package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

type sseEvent struct {
	Seq   uint64   `json:"seq"`
	Kinds []string `json:"kinds"`
}

// openEvents opens GET /v1/events and returns its change events.
func openEvents(t *testing.T, in *instance, token string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", in.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /v1/events: %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer r.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(r.Body)
		var event string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "change":
				var ev sseEvent
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev) == nil {
					out <- ev
				}
			}
		}
	}()
	return out
}

// waitKind reads events until one lists kind.
func waitKind(t *testing.T, evs <-chan sseEvent, kind string) sseEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("the event stream ended before a %s change", kind)
			}
			for _, k := range ev.Kinds {
				if k == kind {
					return ev
				}
			}
		case <-deadline:
			t.Fatalf("no %s change event within 20 s", kind)
		}
	}
}

func TestEventsEmitOnChange(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		in := start(t, b.config(t, fast), "")
		in.waitLeader(t, 30*time.Second)
		evs := openEvents(t, in, readToken)
		first := <-evs
		if first.Seq != 1 || strings.Join(first.Kinds, ",") != "fleet,rollouts,regions,deny" {
			t.Fatalf("first event %+v, want seq 1 with every kind", first)
		}
		r := in.call(t, adminToken, "POST", "/v1/deny/entries", "application/json", []byte(`[{"kind":"cidr","value":"203.0.113.0/24","ttl":"1h","reason":"test"}]`), nil, nil)
		if r.StatusCode != 200 {
			t.Fatalf("add deny: %d", r.StatusCode)
		}
		ev := waitKind(t, evs, "deny")
		if ev.Seq <= first.Seq {
			t.Fatalf("event %+v does not follow %+v", ev, first)
		}
		newNode(t, in.url, model.Identity{NodeID: "ev-eu-1", Region: "eu", Zone: "eu-1a"})
		waitKind(t, evs, "fleet")
		if r := in.call(t, adminToken, "POST", "/v1/regions/eu/drain", "application/json", []byte(`{"reason":"test"}`), nil, nil); r.StatusCode != 200 {
			t.Fatalf("drain: %d", r.StatusCode)
		}
		waitKind(t, evs, "regions")
		in.submit(t, cfgYAML(2, 100))
		waitKind(t, evs, "rollouts")
	})
}

func TestWhoamiAndDashboardAuth(t *testing.T) {
	in := start(t, backend{name: "embedded", dir: t.TempDir()}.config(t, fast), "")
	in.waitLeader(t, 30*time.Second)
	for _, c := range []struct {
		token string
		role  string
		write bool
	}{{readToken, "read", false}, {adminToken, "admin", true}} {
		var me struct {
			Name  string
			Role  string
			Write bool
		}
		if r := in.call(t, c.token, "GET", "/v1/whoami", "", nil, nil, &me); r.StatusCode != 200 || me.Role != c.role || me.Write != c.write {
			t.Fatalf("whoami with the %s token: %d %+v", c.role, r.StatusCode, me)
		}
	}
	for _, c := range []struct {
		token, method, path, body string
		code                      int
	}{
		{"", "GET", "/v1/whoami", "", 401},
		{"", "GET", "/v1/events", "", 401},
		{"wrong-token", "GET", "/v1/events", "", 401},
		{nodeToken, "GET", "/v1/whoami", "", 403},
		{nodeToken, "GET", "/v1/events", "", 403},
		{readToken, "POST", "/v1/deny/entries", `[{"kind":"cidr","value":"203.0.113.0/24","ttl":"1h"}]`, 403},
		{readToken, "POST", "/v1/regions/eu/drain", `{}`, 403},
		{readToken, "POST", "/v1/rollouts/x/pause", `{}`, 403},
		{"", "GET", "/ui/", "", 200}, // the page holds no data: every figure on it comes from /v1 with the token
		{"", "POST", "/ui/", "", 405},
	} {
		r := in.call(t, c.token, c.method, c.path, "application/json", []byte(c.body), nil, nil)
		if r.StatusCode != c.code {
			t.Errorf("%s %s with token %q: %d, want %d", c.method, c.path, c.token, r.StatusCode, c.code)
		}
		if strings.HasPrefix(c.path, "/ui/") && !strings.Contains(r.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s %s: no CSP: %v", c.method, c.path, r.Header)
		}
	}
}
