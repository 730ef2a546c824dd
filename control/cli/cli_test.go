package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func cfg(routes ...string) string {
	return `listeners: [{name: public, address: "127.0.0.1:0"}]
clusters:
  - {name: users, endpoints: [{address: "10.0.0.1:8080"}]}
routes:
` + strings.Join(routes, "")
}

const (
	getUser    = "  - {id: get-user, host: api.example.com, methods: [GET], path_template: \"/v1/users/{id}\", upstream_cluster: users, timeout_ms: 100}\n"
	getUserSlo = "  - {id: get-user, host: api.example.com, methods: [GET], path_template: \"/v1/users/{id}\", upstream_cluster: users, timeout_ms: 250}\n"
	listUsers  = "  - {id: list-users, host: api.example.com, methods: [GET], path_template: \"/v1/users\", upstream_cluster: users, timeout_ms: 100}\n"
)

// Every subcommand against a running control plane, as an operator uses
// them: submit, revisions, diff, rollout status/pause/resume/abort (with
// a queued revision), fleet with a node's refusal, deny add/list/remove;
// tables compared with golden files, -o json decoded.
func TestOperatorFlow(t *testing.T) {
	p := startPlane(t)
	out := p.ok(t, "submit", "-f", p.file(t, "v1.yaml", cfg(getUser)), "-message", "first")
	golden(t, "submit.txt", out)
	if out := p.ok(t, "rollout", "status", "r1", "-wait", "-timeout", "1m"); !strings.Contains(out, "r1 pending") && !strings.Contains(out, "r1 done") ||
		!strings.Contains(out, "state:         done") {
		t.Fatalf("rollout status -wait:\n%s", out)
	}

	out = p.ok(t, "submit", "-f", p.file(t, "v2.yaml", cfg(getUserSlo, listUsers)), "-message", "list users", "-o", "json")
	var rev model.Revision
	if err := json.Unmarshal([]byte(out), &rev); err != nil || rev.ID != "r2" || rev.Routes != 2 || rev.Message != "list users" {
		t.Fatalf("submit -o json: %v %s", err, out)
	}
	eventually(t, "r2 done", func() bool { return p.rollout(t, "r2").State == model.StateDone })

	golden(t, "revisions.txt", p.ok(t, "revisions"))
	golden(t, "diff.txt", p.ok(t, "diff", "r2")) // from its baseline, r1
	if out := p.ok(t, "diff", "r1", "-from", "r2", "-o", "json"); !strings.Contains(out, `"routes_removed": [`) || !strings.Contains(out, `"list-users"`) {
		t.Fatalf("diff -from -o json: %s", out)
	}
	golden(t, "rollout-r2.txt", p.ok(t, "rollout", "status", "r2"))

	// A canary that is live but never runs r3 holds r3 in its first stage;
	// r4, submitted meanwhile, is queued behind it.
	p.report(t, model.Status{Identity: model.Identity{NodeID: "edge-1", Region: "eu", Zone: "eu-1a", Cohort: "canary"},
		Active: snapshot.Version{Epoch: 1, Sequence: 2}, Ready: true})
	p.ok(t, "submit", "-f", p.file(t, "v3.yaml", cfg(getUser, listUsers)), "-message", "revert the timeout")
	eventually(t, "r3 to wait in canary", func() bool { ro := p.rollout(t, "r3"); return ro.Phase == model.PhaseWaiting })
	p.ok(t, "submit", "-f", p.file(t, "v4.yaml", cfg(getUser)), "-message", "drop list-users")
	golden(t, "rollout-status.txt", p.ok(t, "rollout", "status"))
	if ro := p.rollout(t, "r4"); ro.State != model.StatePending || ro.QueuedBehind != "r3" {
		t.Fatalf("r4: %+v queued behind %q", ro.Rollout, ro.QueuedBehind)
	}
	if out := p.ok(t, "rollout", "pause", "r3", "-reason", "checking dashboards"); !strings.Contains(out, "staging (paused)") || !strings.Contains(out, "checking dashboards") {
		t.Fatalf("pause:\n%s", out)
	}
	if out := p.ok(t, "rollout", "resume", "r3"); strings.Contains(out, "paused") {
		t.Fatalf("resume:\n%s", out)
	}
	out = p.ok(t, "rollout", "abort", "r3", "-reason", "wrong idea", "-o", "json")
	var ro Rollout
	if err := json.Unmarshal([]byte(out), &ro); err != nil || ro.State != model.StateAborted || ro.Reason != "wrong idea" || ro.RolledBackTo == "" {
		t.Fatalf("abort -o json: %v %s", err, out)
	}

	if _, err := p.run(t, readToken, "rollout", "status", "r3", "-wait"); err == nil || !strings.Contains(err.Error(), "rollout r3 aborted: wrong idea") {
		t.Fatalf("rollout status -wait of an aborted rollout: %v", err)
	}

	// The fleet: a second node reports that its proxy refused r3.
	p.report(t, model.Status{Identity: model.Identity{NodeID: "edge-2", Region: "eu", Zone: "eu-1b"},
		Active: snapshot.Version{Epoch: 1, Sequence: 2}, Ready: true, Requests: 100, Errors: 1, ErrorRate: 0.01, Refused: 1,
		RefusedVersion: snapshot.Version{Epoch: 1, Sequence: 3}, RefusedReason: "proxy: build: open /etc/tls/api.pem: no such file or directory"})
	// r4 is published again as r6 (the rollback r5 went out after it) and stages.
	eventually(t, "r4 (as r6) to stage after the rollback "+ro.RolledBackTo, func() bool {
		var f Fleet
		err := json.Unmarshal([]byte(p.ok(t, "fleet", "-o", "json")), &f)
		return err == nil && f.Stable == ro.RolledBackTo && f.Rolling == "r6" && len(f.Nodes) == 2
	})
	golden(t, "fleet.txt", p.ok(t, "fleet"))
	var fl Fleet
	if err := json.Unmarshal([]byte(p.ok(t, "fleet", "-o", "json")), &fl); err != nil || len(fl.Nodes) != 2 {
		t.Fatalf("fleet -o json: %v %+v", err, fl)
	}

	p.ok(t, "deny", "add", "cidr", "203.0.113.7/24", "-ttl", "1h", "-reason", "scraping")
	p.ok(t, "deny", "add", "-f", p.file(t, "deny.yaml", "[{kind: jti, value: token-1, ttl: 10m, reason: leaked}]"))
	golden(t, "deny-list.txt", p.ok(t, "deny", "list"))
	p.ok(t, "deny", "remove", "cidr", "203.0.113.0/24")
	var ds model.DenyState
	if err := json.Unmarshal([]byte(p.ok(t, "deny", "list", "-o", "json")), &ds); err != nil || len(ds.Entries) != 1 || ds.Entries[0].Kind != "jti" {
		t.Fatalf("deny list after remove: %v %+v", err, ds)
	}
}

// Bad input gets a clear error, and the API's problems are printed.
func TestErrors(t *testing.T) {
	p := startPlane(t)
	bad := p.file(t, "bad.yaml", cfg("  - {id: x, host: api.example.com, methods: [GET], path_template: \"/x\", upstream_cluster: nowhere, timeout_ms: 100}\n"))
	for _, c := range []struct {
		token string
		args  []string
		want  []string
	}{
		{adminToken, []string{"rollout", "status", "r99"}, []string{"404 Not Found", "r99"}},
		{adminToken, []string{"diff", "r99", "-from", "r98"}, []string{"404"}},
		{adminToken, []string{"submit", "-f", "/nonexistent/config.yaml"}, []string{"read the config", "/nonexistent/config.yaml"}},
		{adminToken, []string{"submit", "-f", bad}, []string{"400 Bad Request: config is invalid", "\n  - ", "nowhere"}},
		{adminToken, []string{"submit"}, []string{"-f FILE is required"}},
		{"", []string{"revisions"}, []string{"no API token", "RAMPART_TOKEN"}},
		{"wrong-token-0123456789", []string{"revisions"}, []string{"401"}},
		{readToken, []string{"rollout", "pause", "r1"}, []string{"403"}},
		{adminToken, []string{"rollout", "explode", "r1"}, []string{`unknown "explode"`}},
		{adminToken, []string{"rollout", "pause"}, []string{"usage: rampart control rollout pause REV"}},
		{adminToken, []string{"revisions", "-o", "yaml"}, []string{`-o "yaml"`}},
		{adminToken, []string{"revisions", "-server", "127.0.0.1:9080"}, []string{"want http://"}},
		{adminToken, []string{"deny", "add", "cidr"}, []string{"usage: rampart control deny add"}},
		{adminToken, []string{"deny", "remove", "cidr", "192.0.2.0/24"}, []string{"404"}},
		{adminToken, []string{"revisions", "-token", "a", "-token-file", "b"}, []string{"not both"}},
	} {
		out, err := p.run(t, c.token, c.args...)
		if err == nil {
			t.Errorf("%v: no error; output:\n%s", c.args, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", c.args, err, w)
			}
		}
	}
	if out, err := p.run(t, adminToken, "fleet", "-h"); err != nil || out != "" {
		t.Fatalf("fleet -h: %v %q", err, out)
	}
	var ae *APIError
	_, err := p.run(t, readToken, "rollout", "abort", "r1")
	if !errors.As(err, &ae) || ae.Code != 403 {
		t.Fatalf("wrong role: %v", err)
	}
}

// nodes enroll prints the node's token once; list shows it, then its
// revocation; a read token may list but not enrol.
func TestNodes(t *testing.T) {
	p := startPlane(t)
	out := p.ok(t, "nodes", "enroll", "edge-7")
	if !strings.Contains(out, "node edge-7 enrolled at ") || !strings.Contains(out, "token: ") {
		t.Fatalf("enroll:\n%s", out)
	}
	var n EnrolledNode
	if err := json.Unmarshal([]byte(p.ok(t, "nodes", "enroll", "edge-8", "-o", "json")), &n); err != nil || n.ID != "edge-8" || len(n.Token) < 16 || n.EnrolledAt.IsZero() {
		t.Fatalf("enroll -o json: %v %+v", err, n)
	}
	if out := p.ok(t, "nodes", "list"); !strings.Contains(out, "edge-7") || !strings.Contains(out, "edge-8") || !strings.HasPrefix(out, "NODE") {
		t.Fatalf("list:\n%s", out)
	}
	if out := p.ok(t, "nodes", "revoke", "edge-7"); out != "node edge-7 revoked\n" {
		t.Fatalf("revoke: %q", out)
	}
	out, err := p.run(t, readToken, "nodes", "list", "-o", "json")
	var list struct{ Nodes []EnrolledNode }
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Nodes) != 2 {
		t.Fatalf("list -o json: %v %s", err, out)
	}
	for _, n := range list.Nodes {
		if (n.ID == "edge-7") == n.RevokedAt.IsZero() || n.Token != "" {
			t.Errorf("node %+v", n)
		}
	}
	if _, err := p.run(t, readToken, "nodes", "enroll", "edge-9"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("enroll with a read token: %v", err)
	}
}
