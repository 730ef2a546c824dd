package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

const invalidYAML = `listeners: [{name: public, address: "127.0.0.1:0"}]
clusters:
  - {name: users, endpoints: [{address: "10.0.0.1:8080"}]}
routes:
  - {id: a, host: api.example.com, methods: [GET], path_template: "/v1/users/{id}", upstream_cluster: users, timeout_ms: 100}
  - {id: b, host: api.example.com, methods: [GET], path_template: "/v1/users/{name}", upstream_cluster: users, timeout_ms: 100}
  - {id: c, host: api.example.com, methods: [POST], path_template: "/v1/users", upstream_cluster: nowhere, timeout_ms: 100, idempotency: none, retry_policy: {max_attempts: 3}}
  - {id: d, host: api.example.com, methods: [GET], path_template: "/v1/d", upstream_cluster: users}
`

// The operator API on both stores: auth, submit, idempotency, every
// validation problem listed, reads, diff, rollback, the deny channel.
func TestAPI(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		in := start(t, b.config(t, fast), "")
		in.waitLeader(t, 30*time.Second)

		// Nothing is open: no token 401, wrong role 403.
		if r := in.call(t, "", "GET", "/v1/revisions", "", nil, nil, nil); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no token: %d", r.StatusCode)
		}
		if r := in.call(t, "wrong-token-xxxxxxxx", "GET", "/v1/revisions", "", nil, nil, nil); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("unknown token: %d", r.StatusCode)
		}
		if r := in.call(t, nodeToken, "GET", "/v1/revisions", "", nil, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("node token on the operator API: %d", r.StatusCode)
		}
		if r := in.call(t, readToken, "POST", "/v1/revisions", "", []byte(cfgYAML(1, 100)), nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("read token submitting: %d", r.StatusCode)
		}

		// Submit with an idempotency key; the same key and body give the same answer.
		key := map[string]string{"Idempotency-Key": "deploy-1"}
		var r1, again model.Revision
		resp := in.call(t, adminToken, "POST", "/v1/revisions?message=first", "application/yaml", []byte(cfgYAML(2, 100)), key, &r1)
		if resp.StatusCode != http.StatusCreated || r1.ID == "" || r1.Version.Epoch == 0 || r1.Routes != 2 || r1.Message != "first" {
			t.Fatalf("submit: %d %+v", resp.StatusCode, r1)
		}
		first := bodyOf(resp)
		resp = in.call(t, adminToken, "POST", "/v1/revisions?message=first", "application/yaml", []byte(cfgYAML(2, 100)), key, &again)
		if resp.StatusCode != http.StatusCreated || bodyOf(resp) != first || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s (first %s)", resp.StatusCode, bodyOf(resp), first)
		}
		if resp = in.call(t, adminToken, "POST", "/v1/revisions", "application/yaml", []byte(cfgYAML(3, 100)), key, nil); resp.StatusCode != http.StatusConflict {
			t.Fatalf("same key, other body: %d %s", resp.StatusCode, bodyOf(resp))
		}

		// Every problem of an invalid config is listed, as snapshot build lists them.
		var eb struct {
			Error    string   `json:"error"`
			Problems []string `json:"problems"`
		}
		resp = in.call(t, adminToken, "POST", "/v1/revisions", "application/yaml", []byte(invalidYAML), nil, &eb)
		want := validationProblems(t, invalidYAML)
		if resp.StatusCode != http.StatusBadRequest || !reflect.DeepEqual(eb.Problems, want) || len(want) < 4 {
			t.Fatalf("invalid config: %d %+v\nwant problems %q", resp.StatusCode, eb, want)
		}
		for _, bad := range []struct{ ctype, body string }{
			{"application/json", `{"routes": [`},
			{"application/yaml", "listeners: [\nnope: 1"},
			{"application/yaml", "bogus_key: 1\n"},
		} {
			if resp = in.call(t, adminToken, "POST", "/v1/revisions", bad.ctype, []byte(bad.body), nil, nil); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("body %q: %d %s", bad.body, resp.StatusCode, bodyOf(resp))
			}
		}

		// JSON bodies work too; the second revision changes get-user and adds route-3.
		cfg, _ := snapshot.ParseYAML([]byte(cfgYAML(3, 250)))
		js, _ := json.Marshal(cfg)
		var r2 model.Revision
		if resp = in.call(t, adminToken, "POST", "/v1/revisions", "application/json", js, nil, &r2); resp.StatusCode != http.StatusCreated {
			t.Fatalf("json submit: %d %s", resp.StatusCode, bodyOf(resp))
		}
		if !r1.Version.Less(r2.Version) {
			t.Fatalf("versions do not increase: %s then %s", r1.Version, r2.Version)
		}

		// Reads.
		var list struct{ Revisions []model.Revision }
		in.call(t, readToken, "GET", "/v1/revisions", "", nil, nil, &list)
		if len(list.Revisions) != 2 || list.Revisions[0].ID != r2.ID {
			t.Fatalf("list: %+v", list)
		}
		var detail plane.RevisionDetail
		if resp = in.call(t, readToken, "GET", "/v1/revisions/"+r1.ID+"?config=1", "", nil, nil, &detail); resp.StatusCode != 200 || len(detail.Config) == 0 || detail.Rollout == nil {
			t.Fatalf("get revision: %d %s", resp.StatusCode, bodyOf(resp))
		}
		resp = in.call(t, readToken, "GET", "/v1/revisions/"+r2.ID+"/snapshot", "", nil, nil, nil)
		if s, err := snapshot.Parse([]byte(bodyOf(resp)), testPub); err != nil || s.Version != r2.Version {
			t.Fatalf("snapshot of %s: %v", r2.ID, err)
		}
		if resp = in.call(t, readToken, "GET", "/v1/revisions/r999999", "", nil, nil, nil); resp.StatusCode != 404 {
			t.Fatalf("unknown revision: %d", resp.StatusCode)
		}

		// Diff: route-3 added, get-user's timeout changed.
		var d model.Diff
		in.call(t, readToken, "GET", "/v1/diff?from="+r1.ID+"&to="+r2.ID, "", nil, nil, &d)
		if !reflect.DeepEqual(d.Added, []string{"route-3"}) || len(d.Removed) != 0 || len(d.Changed) != 1 ||
			d.Changed[0].ID != "get-user" || len(d.Changed[0].Fields) != 1 || d.Changed[0].Fields[0].Field != "timeout_ms" {
			t.Fatalf("diff: %+v", d)
		}

		// Roll back to r1 at once: a new revision, a newer version, r1's config, stable.
		var rb model.Revision
		if resp = in.call(t, adminToken, "POST", "/v1/rollback", "application/json", []byte(`{"to":"`+r1.ID+`"}`), nil, &rb); resp.StatusCode != http.StatusCreated {
			t.Fatalf("rollback: %d %s", resp.StatusCode, bodyOf(resp))
		}
		if rb.Kind != model.KindRollback || rb.Source != r1.ID || !r2.Version.Less(rb.Version) || rb.ConfigSHA256 != r1.ConfigSHA256 || rb.SHA256 == r1.SHA256 {
			t.Fatalf("rollback revision %+v (r1 %+v)", rb, r1)
		}
		var fv plane.FleetView
		var fleetStatus int
		deadline := time.Now().Add(30 * time.Second)
		for {
			fv = plane.FleetView{}
			fleetStatus = in.call(t, readToken, "GET", "/v1/fleet", "", nil, nil, &fv).StatusCode
			if fv.Stable == rb.ID {
				break
			}
			if time.Now().After(deadline) {
				// Say which layer is behind: the store (the rollback's
				// write) or the instance's view of it (reloaded on every
				// event and every 2 s).
				stored := "(embedded)"
				if b.dsn != "" {
					stored = storedStable(t, b.dsn)
				}
				t.Fatalf("timed out after 30s waiting for the rollback %s to be stable: GET /v1/fleet %d says stable %q (leader %+v); the store says %q",
					rb.ID, fleetStatus, fv.Stable, fv.Leader, stored)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if ro := in.rollout(t, r2.ID); ro.Open() {
			t.Fatalf("rollout of %s still open after the rollback: %+v", r2.ID, ro)
		}
		if resp = in.call(t, adminToken, "POST", "/v1/rollback", "application/json", []byte(`{"to":"r424242"}`), nil, nil); resp.StatusCode != 404 {
			t.Fatalf("rollback to an unknown revision: %d", resp.StatusCode)
		}

		// The deny channel.
		var ds model.DenyState
		resp = in.call(t, adminToken, "POST", "/v1/deny/entries", "application/yaml",
			[]byte("- {kind: cidr, value: 10.1.2.3/8, ttl: 1h, reason: abuse}\n- {kind: jti, value: tok-1, ttl: 10m}\n"), nil, &ds)
		if resp.StatusCode != 200 || ds.Sequence != 1 || len(ds.Entries) != 2 || ds.Entries[0].Value != "10.0.0.0/8" {
			t.Fatalf("deny add: %d %+v", resp.StatusCode, ds)
		}
		if resp = in.call(t, adminToken, "POST", "/v1/deny/entries", "application/yaml", []byte("- {kind: bogus, value: x, ttl: 1h}\n"), nil, nil); resp.StatusCode != 400 {
			t.Fatalf("bad deny entry: %d", resp.StatusCode)
		}
		in.call(t, adminToken, "POST", "/v1/deny/expire", "application/json", []byte(`{"kind":"cidr","value":"10.0.0.0/8"}`), nil, &ds)
		if ds.Sequence != 2 || len(ds.Entries) != 1 || ds.Entries[0].Kind != "jti" {
			t.Fatalf("deny expire: %+v", ds)
		}
		if resp = in.call(t, adminToken, "POST", "/v1/deny/expire", "application/json", []byte(`{"kind":"cidr","value":"10.0.0.0/8"}`), nil, nil); resp.StatusCode != 404 {
			t.Fatalf("expire a missing entry: %d", resp.StatusCode)
		}
		var leader map[string]any
		if in.call(t, readToken, "GET", "/v1/leader", "", nil, nil, &leader); leader["leader"] != true {
			t.Fatalf("leader: %v", leader)
		}
	})
}

func validationProblems(t *testing.T, y string) []string {
	c, err := snapshot.ParseYAML([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	c.Version = snapshot.Version{Epoch: 1, Sequence: 1}
	snapshot.Normalize(c)
	err = snapshot.Validate(c)
	ve, ok := err.(*snapshot.ValidationError)
	if !ok {
		t.Fatalf("validate: %v", err)
	}
	for _, p := range ve.Problems {
		if strings.TrimSpace(p) == "" {
			t.Fatal("empty problem")
		}
	}
	return ve.Problems
}

// storedStable reads the stable revision from the PostgreSQL store.
func storedStable(t *testing.T, dsn string) string {
	t.Helper()
	var stable string
	if err := withPG(dsn, func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT coalesce(doc->>'stable', '') FROM singletons WHERE name = 'fleet'").Scan(&stable)
	}); err != nil {
		return "unreadable: " + err.Error()
	}
	return stable
}
