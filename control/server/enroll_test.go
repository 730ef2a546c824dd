package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/pgtest"
)

type enrolment struct {
	ID         string    `json:"id"`
	Token      string    `json:"token"`
	EnrolledAt time.Time `json:"enrolled_at"`
}

func (in *instance) enroll(t *testing.T, id string) enrolment {
	t.Helper()
	var e enrolment
	r := in.call(t, adminToken, "POST", "/v1/nodes/"+id+"/enroll", "", nil, nil, &e)
	if r.StatusCode != http.StatusCreated || e.ID != id || len(e.Token) < 32 || e.EnrolledAt.IsZero() {
		t.Fatalf("enrol %s: %d %+v", id, r.StatusCode, e)
	}
	return e
}

// report posts a status report for node id with token and returns the status.
func (in *instance) report(t *testing.T, token, id string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(model.Status{Identity: model.Identity{NodeID: id, Cohort: "canary"}, Ready: true, Requests: 100})
	r := in.call(t, token, "POST", "/v1/node/status", "application/json", body, nil, nil)
	return r.StatusCode, bodyOf(r)
}

type fleetWithRefused struct {
	Nodes []struct {
		model.Node
		Live bool `json:"live"`
	} `json:"nodes"`
	Refused []struct {
		ID, Reason  string
		Count       uint64
		LastAttempt time.Time `json:"last_attempt"`
	} `json:"refused"`
}

func (in *instance) fleetView(t *testing.T) fleetWithRefused {
	t.Helper()
	var f fleetWithRefused
	if r := in.call(t, readToken, "GET", "/v1/fleet", "", nil, nil, &f); r.StatusCode != 200 {
		t.Fatalf("fleet: %d %s", r.StatusCode, bodyOf(r))
	}
	return f
}

// Each node has its own token, bound to its id: enrolled, it reports and
// watches as itself; as another id it is refused (403), the refusal is
// listed in the fleet view and the other id never appears; rotation and
// revocation stop the old token at once (401); the shared node token
// may not speak for an enrolled node, nor an admin token for any.
func TestNodeEnrolment(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		in := start(t, b.config(t, fast), "")
		in.waitLeader(t, 30*time.Second)
		rev := in.submit(t, cfgYAML(1, 100)) // no nodes yet: every stage is skipped
		in.waitRollout(t, rev.ID, 30*time.Second, model.StateDone)
		e := in.enroll(t, "n1")
		if code, body := in.report(t, e.Token, "n1"); code != http.StatusNoContent {
			t.Fatalf("report as itself: %d %s", code, body)
		}
		eventually(t, 30*time.Second, "the enrolled node to get its snapshot", func() bool {
			r := in.call(t, e.Token, "GET", "/v1/node/snapshot?node=n1&timeout=100ms", "", nil, nil, nil)
			return r.StatusCode == 200 && r.Header.Get("X-Rampart-Version") == rev.Version.String()
		})

		code, body := in.report(t, e.Token, "ghost")
		if code != http.StatusForbidden || !strings.Contains(body, `node \"n1\"'s`) {
			t.Fatalf("n1's token reporting as ghost: %d %s", code, body)
		}
		if r := in.call(t, e.Token, "GET", "/v1/node/deny?node=canary-1&timeout=10ms", "", nil, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("n1's token watching as canary-1: %d %s", r.StatusCode, bodyOf(r))
		}
		if code, body := in.report(t, nodeToken, "n1"); code != http.StatusForbidden || !strings.Contains(body, "enrolled") {
			t.Fatalf("the shared token reporting as the enrolled n1: %d %s", code, body)
		}
		if code, body := in.report(t, adminToken, "n1"); code != http.StatusForbidden {
			t.Fatalf("an admin token on a node endpoint: %d %s", code, body)
		}
		if code, body := in.report(t, e.Token, "n1"); code != http.StatusNoContent {
			t.Fatalf("report as itself: %d %s", code, body)
		}
		f := in.fleetView(t)
		refused := map[string]uint64{}
		for _, r := range f.Refused {
			refused[r.ID] = r.Count
		}
		if refused["ghost"] != 1 || refused["canary-1"] != 1 || refused["n1"] != 1 {
			t.Fatalf("refused list: %+v", f.Refused)
		}
		for _, n := range f.Nodes {
			if n.NodeID == "ghost" || n.NodeID == "canary-1" {
				t.Fatalf("a refused id is in the fleet: %+v", n)
			}
		}
		if len(f.Nodes) != 1 || f.Nodes[0].NodeID != "n1" || !f.Nodes[0].Live {
			t.Fatalf("fleet nodes: %+v", f.Nodes)
		}

		// Rotation: the old token stops at once, the new one works.
		e2 := in.enroll(t, "n1")
		if code, _ := in.report(t, e.Token, "n1"); code != http.StatusUnauthorized {
			t.Fatalf("the rotated-out token: %d, want 401", code)
		}
		if code, body := in.report(t, e2.Token, "n1"); code != http.StatusNoContent {
			t.Fatalf("the new token: %d %s", code, body)
		}
		// Revocation.
		if r := in.call(t, adminToken, "POST", "/v1/nodes/n1/revoke", "", nil, nil, nil); r.StatusCode != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", r.StatusCode, bodyOf(r))
		}
		if code, body := in.report(t, e2.Token, "n1"); code != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
			t.Fatalf("a revoked token: %d %s", code, body)
		}
		if r := in.call(t, adminToken, "POST", "/v1/nodes/nobody/revoke", "", nil, nil, nil); r.StatusCode != http.StatusNotFound {
			t.Fatalf("revoke an unknown node: %d %s", r.StatusCode, bodyOf(r))
		}
		if r := in.call(t, adminToken, "POST", "/v1/nodes/bad%20id/enroll", "", nil, nil, nil); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("enrol a bad id: %d %s", r.StatusCode, bodyOf(r))
		}
		if r := in.call(t, readToken, "POST", "/v1/nodes/n2/enroll", "", nil, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("enrol with a read token: %d", r.StatusCode)
		}
		var list struct {
			Nodes []struct {
				ID         string     `json:"id"`
				EnrolledAt time.Time  `json:"enrolled_at"`
				RevokedAt  *time.Time `json:"revoked_at"`
				LastSeen   *time.Time `json:"last_seen"`
			} `json:"nodes"`
		}
		if r := in.call(t, readToken, "GET", "/v1/nodes", "", nil, nil, &list); r.StatusCode != 200 {
			t.Fatalf("list: %d", r.StatusCode)
		}
		if len(list.Nodes) != 1 || list.Nodes[0].ID != "n1" || list.Nodes[0].RevokedAt == nil || list.Nodes[0].LastSeen == nil ||
			!list.Nodes[0].EnrolledAt.Equal(e2.EnrolledAt) {
			t.Fatalf("GET /v1/nodes: %+v", list.Nodes)
		}
		if strings.Contains(fmt.Sprint(list), e2.Token) {
			t.Fatal("the listing shows a token")
		}
		// Re-enrolling a revoked node gives it a working token again.
		e3 := in.enroll(t, "n1")
		if code, body := in.report(t, e3.Token, "n1"); code != http.StatusNoContent {
			t.Fatalf("re-enrolled after revocation: %d %s", code, body)
		}
	})
}

// Writes of enrolment go to the leader only (fenced like every write): a
// follower answers 503 naming the leader; any instance authenticates.
func TestEnrolmentOnFollower(t *testing.T) {
	b := backend{name: "postgres", dsn: pgtest.DSN(t)}
	a := start(t, b.config(t, fast), "")
	a.waitLeader(t, 30*time.Second)
	f := start(t, b.config(t, fast), "")
	var eb struct{ Error, Leader string }
	if r := f.call(t, adminToken, "POST", "/v1/nodes/n1/enroll", "", nil, nil, &eb); r.StatusCode != http.StatusServiceUnavailable || !strings.Contains(eb.Error, "not the leader") {
		t.Fatalf("enrol on the follower: %d %+v", r.StatusCode, eb)
	}
	e := a.enroll(t, "n1")
	if code, body := f.report(t, e.Token, "n1"); code != http.StatusNoContent {
		t.Fatalf("report to the follower: %d %s", code, body)
	}
	if r := a.call(t, adminToken, "POST", "/v1/nodes/n1/revoke", "", nil, nil, nil); r.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d", r.StatusCode)
	}
	if code, _ := f.report(t, e.Token, "n1"); code != http.StatusUnauthorized {
		t.Fatalf("a token revoked on the leader, at the follower: %d, want 401", code)
	}
}
