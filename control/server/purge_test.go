package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/format/purge"
)

// The purge endpoint on both stores: admin only, every bad field named in
// a 400, the signed document served to nodes by the long-poll (at once
// when newer, 204 when not), and kept across a restart of the control
// plane.
func TestPurgeAPI(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		cfg := b.config(t, fast)
		in := start(t, cfg, "")
		in.waitLeader(t, 30*time.Second)
		body := []byte(`{"route": "pages"}`)
		for _, c := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {readToken, http.StatusForbidden}, {nodeToken, http.StatusForbidden}} {
			if r := in.call(t, c.token, "POST", "/v1/purge", "application/json", body, nil, nil); r.StatusCode != c.want {
				t.Fatalf("POST /v1/purge with token %q: %d %s, want %d", c.token, r.StatusCode, bodyOf(r), c.want)
			}
		}
		long := strings.Repeat("a", purge.MaxSelectorBytes+1)
		for in_, want := range map[string]string{
			``:                                     "no selector",
			`{}`:                                   "no selector",
			`{"route": "", "prefix": ""}`:          "no selector",
			`{"route": "` + long + `"}`:            "route is 1025 bytes, over the 1024 limit",
			`{"prefix": "` + long + `"}`:           "prefix is 1025 bytes",
			`{"surrogate_key": "` + long + `"}`:    "surrogate_key is 1025 bytes",
			`{"surrogate_key": "a b"}`:             "surrogate_key \"a b\" has white space",
			`{"route": "a\u0001"}`:                 "route has a control character",
			`{"prefix": " example.com/"}`:          "prefix \" example.com/\" has leading or trailing white space",
			`{"route": "pages", "tag": "x"}`:       "unknown field",
			`{"route": 7}`:                         "cannot unmarshal",
			`{"route": "pages"} {"route": "more"}`: "",
		} {
			var eb struct{ Error string }
			r := in.call(t, adminToken, "POST", "/v1/purge", "application/json", []byte(in_), nil, &eb)
			if r.StatusCode != http.StatusBadRequest || !strings.Contains(eb.Error, want) {
				t.Errorf("POST /v1/purge %.40q: %d %q, want 400 with %q", in_, r.StatusCode, eb.Error, want)
			}
		}
		// Nothing published yet: a node's long-poll ends empty.
		if r := in.call(t, nodeToken, "GET", "/v1/node/purge?node=n1&timeout=50ms", "", nil, nil, nil); r.StatusCode != http.StatusNoContent {
			t.Fatalf("node purge watch before any purge: %d %s", r.StatusCode, bodyOf(r))
		}
		var res plane.PurgeResult
		for i, req := range []string{`{"route": "pages"}`, `{"prefix": "example.com/blog/", "surrogate_key": "post-1"}`} {
			if r := in.call(t, adminToken, "POST", "/v1/purge", "application/json", []byte(req), nil, &res); r.StatusCode != http.StatusOK {
				t.Fatalf("POST /v1/purge %s: %d %s", req, r.StatusCode, bodyOf(r))
			}
			if res.Sequence != uint64(i+1) || res.Rule.ID != uint64(i+1) || res.Rules != i+1 || res.Rule.By != "ops" || res.Rule.At.IsZero() {
				t.Fatalf("purge %d: %+v", i+1, res)
			}
		}
		// The node gets the signed document, newer than what it has.
		r := in.call(t, nodeToken, "GET", "/v1/node/purge?node=n1&version=1.1&timeout=5s", "", nil, nil, nil)
		if r.StatusCode != http.StatusOK || r.Header.Get(api.HeaderPurgeVersion) != "1.2" {
			t.Fatalf("node purge watch: %d %q", r.StatusCode, r.Header.Get(api.HeaderPurgeVersion))
		}
		doc, err := purge.Parse([]byte(bodyOf(r)), testPub)
		if err != nil {
			t.Fatalf("the served purge document does not verify: %v", err)
		}
		if len(doc.Rules) != 2 || doc.Rules[0].Route != "pages" || doc.Rules[1].Prefix != "example.com/blog/" || doc.Rules[1].SurrogateKey != "post-1" ||
			doc.Rules[1].AtUnixNano != res.Rule.At.UnixNano() {
			t.Fatalf("document rules %+v", doc.Rules)
		}
		if r := in.call(t, nodeToken, "GET", "/v1/node/purge?node=n1&version=1.2&timeout=50ms", "", nil, nil, nil); r.StatusCode != http.StatusNoContent {
			t.Fatalf("node purge watch at the current version: %d", r.StatusCode)
		}
		if r := in.call(t, readToken, "GET", "/v1/node/purge?node=n1&timeout=50ms", "", nil, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("read token on the node purge watch: %d", r.StatusCode)
		}
		// A waiting long-poll is answered when a purge commits.
		got := make(chan *http.Response, 1)
		go func() {
			got <- in.call(t, nodeToken, "GET", "/v1/node/purge?node=n1&version=1.2&timeout=20s", "", nil, nil, nil)
		}()
		time.Sleep(50 * time.Millisecond)
		in.call(t, adminToken, "POST", "/v1/purge", "application/json", []byte(`{"surrogate_key": "post-2"}`), nil, &res)
		select {
		case r := <-got:
			if r.StatusCode != http.StatusOK || r.Header.Get(api.HeaderPurgeVersion) != "1.3" {
				t.Fatalf("woken long-poll: %d %q", r.StatusCode, r.Header.Get(api.HeaderPurgeVersion))
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting long-poll was not answered by the purge")
		}

		// Durable: a restarted control plane serves the same rules and goes on from them.
		_ = in.srv.Close()
		in = start(t, cfg, "")
		in.waitLeader(t, 30*time.Second)
		var st model.PurgeState
		if r := in.call(t, readToken, "GET", "/v1/purge", "", nil, nil, &st); r.StatusCode != http.StatusOK || st.Sequence != 3 || len(st.Rules) != 3 || st.Rules[2].SurrogateKey != "post-2" {
			t.Fatalf("GET /v1/purge after a restart: %d %+v", r.StatusCode, st)
		}
		in.call(t, adminToken, "POST", "/v1/purge", "application/json", []byte(`{"route": "x"}`), nil, &res)
		if res.Sequence != 4 || res.Rule.ID != 4 {
			t.Fatalf("purge after a restart: %+v", res)
		}
	})
}
