package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

const monitorToken = "monitor-token-0123456789"

// regionalYAML is a config with three regions and two platforms.
const regionalYAML = `listeners: [{name: public, address: "127.0.0.1:0"}]
regions:
  - {name: us-east}
  - {name: eu-west}
  - {name: eu-central}
platforms:
  - {name: accounts-db, clusters: [accounts], replica_regions: [eu-west, eu-central, us-east]}
  - {name: ledger-db, clusters: [ledger], replica_regions: [eu-west, eu-central]}
clusters:
  - name: accounts
    endpoints:
      - {address: "10.1.0.1:8080", region: eu-west}
      - {address: "10.2.0.1:8080", region: eu-central}
      - {address: "10.3.0.1:8080", region: us-east}
  - name: ledger
    endpoints:
      - {address: "10.1.1.1:8080", region: eu-west}
      - {address: "10.2.1.1:8080", region: eu-central}
routes:
  - {id: get-account, host: api.example.com, methods: [GET], path_template: "/v1/accounts/{id}", upstream_cluster: accounts, timeout_ms: 1000}
`

// regionNode is an in-process node: a real node client whose proxy is
// simulated (ready, the accounts cluster's healthy endpoints, the agent's
// announced prefixes), writing the region state to its own file.
type regionNode struct {
	id     model.Identity
	dir    string
	client *nodeclient.Client
	stop   func()

	mu       sync.Mutex
	ready    bool
	accounts int // healthy endpoints of cluster accounts
}

func newRegionNode(t *testing.T, url string, id model.Identity) *regionNode {
	n := &regionNode{id: id, dir: t.TempDir(), ready: true, accounts: 1}
	n.client = newRegionClient(t, url, id, n.dir, n.observe, 50*time.Millisecond)
	n.stop = runClient(t, n.client)
	return n
}

// newRegionClient is a real node client for id that keeps its snapshots
// and its region-state file (regionStateIn reads it) in dir, and reports
// what report observes every interval. Not started: runClient runs it.
func newRegionClient(t *testing.T, url string, id model.Identity, dir string,
	report func(context.Context) (nodeclient.Observation, error), interval time.Duration) *nodeclient.Client {
	t.Helper()
	c, err := nodeclient.New(nodeclient.Config{URL: url, Token: nodeToken, Identity: id, PublicKey: testPub,
		SnapshotDir: filepath.Join(dir, "snapshots"), RegionStateFile: filepath.Join(dir, "region-state.json"),
		Reporter: report, ReportInterval: interval, WatchTimeout: 2 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// regionStateIn is the region-state document in the file a region client
// keeps in dir (nil: none yet); one that does not verify fails the test.
func regionStateIn(t *testing.T, dir, node string) *regionstate.State {
	data, err := os.ReadFile(filepath.Join(dir, "region-state.json"))
	if err != nil {
		return nil
	}
	s, err := regionstate.Parse(data, testPub)
	if err != nil {
		t.Fatalf("node %s: its region-state file does not verify: %v", node, err)
	}
	return s
}

// observe: the proxy runs what the client downloaded.
func (n *regionNode) observe(context.Context) (nodeclient.Observation, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.client.Status().Downloaded
	return nodeclient.Observation{Active: v, Ready: n.ready && v.Epoch > 0,
		Clusters: []model.ClusterHealth{{Name: "accounts", Healthy: n.accounts, Total: 1}}}, nil
}

func (n *regionNode) set(ready bool, accounts int) {
	n.mu.Lock()
	n.ready, n.accounts = ready, accounts
	n.mu.Unlock()
}

// state is the region-state document in the node's file (nil: none yet).
func (n *regionNode) state(t *testing.T) *regionstate.State {
	return regionStateIn(t, n.dir, n.id.NodeID)
}

func regionalConfig(t *testing.T, b backend) *config.Config {
	cfg := b.config(t, fast)
	cfg.Regions = config.Regions{MinReadyPercent: 60, CriticalClusters: []string{"accounts"}, ReportMaxAge: config.Duration(2 * time.Second)}
	cfg.RegionState.Refresh = config.Duration(500 * time.Millisecond)
	cfg.Tokens = append(cfg.Tokens, config.Token{Name: "monitoring", Role: "monitor", SHA256: api.HashToken(monitorToken)})
	return cfg
}

// everyNode waits until cond holds for the document on every node.
func everyNode(t *testing.T, nodes []*regionNode, within time.Duration, what string, cond func(*regionstate.State) bool) {
	t.Helper()
	eventually(t, within, what+" on every node", func() bool {
		for _, n := range nodes {
			s := n.state(t)
			if s == nil || !cond(s) {
				return false
			}
		}
		return true
	})
}

func healthy(s *regionstate.State, name string) bool {
	r, ok := s.Region(name)
	return ok && r.Healthy
}

// TestRegionHealthDrainAndPublish: ten nodes in three regions follow one
// control plane. A region's nodes going unready, or losing the critical
// cluster, flips that region alone; a drain and an undrain reach every
// node; with the control plane down the nodes keep the last document.
func TestRegionHealthDrainAndPublish(t *testing.T) {
	b := backend{name: "embedded", dir: t.TempDir()}
	in := start(t, regionalConfig(t, b), "")
	in.waitLeader(t, 30*time.Second)
	var nodes []*regionNode
	byRegion := map[string][]*regionNode{}
	for i, r := range []string{"us-east", "us-east", "us-east", "us-east", "eu-west", "eu-west", "eu-west", "eu-central", "eu-central", "eu-central"} {
		n := newRegionNode(t, in.url, model.Identity{NodeID: fmt.Sprintf("%s-%d", r, i), Region: r, Zone: r + "-1a"})
		nodes = append(nodes, n)
		byRegion[r] = append(byRegion[r], n)
	}
	rev := in.submit(t, regionalYAML)
	in.waitRollout(t, rev.ID, 60*time.Second, model.StateDone)

	everyNode(t, nodes, 30*time.Second, "three healthy regions serving "+rev.Version.String(), func(s *regionstate.State) bool {
		for _, r := range []string{"us-east", "eu-west", "eu-central"} {
			reg, _ := s.Region(r)
			if !reg.Healthy || reg.ConfigVersion != envelope.Version(rev.Version) {
				return false
			}
		}
		return len(s.Platforms) == 2
	})

	// Two of three eu-central nodes unready: 33% < 60%, eu-central alone flips.
	byRegion["eu-central"][0].set(false, 1)
	byRegion["eu-central"][1].set(false, 1)
	everyNode(t, nodes, 30*time.Second, "eu-central unhealthy, the others healthy", func(s *regionstate.State) bool {
		return !healthy(s, "eu-central") && healthy(s, "eu-west") && healthy(s, "us-east")
	})
	var rv struct {
		Regions []model.RegionHealth `json:"regions"`
	}
	if r := in.call(t, readToken, "GET", "/v1/regions", "", nil, nil, &rv); r.StatusCode != 200 || len(rv.Regions) != 3 {
		t.Fatalf("GET /v1/regions: %d %+v", r.StatusCode, rv)
	}
	for _, h := range rv.Regions {
		if h.Name == "eu-central" && (h.Healthy || h.Ready != 1 || h.Fresh != 3 || h.Why != "1 of 3 fresh nodes ready (33% < 60%)") {
			t.Fatalf("eu-central in /v1/regions: %+v", h)
		}
	}
	byRegion["eu-central"][0].set(true, 1)
	byRegion["eu-central"][1].set(true, 1)
	// One of four us-east nodes without the critical cluster: 75% still
	// holds; two of four: 50% does not.
	byRegion["us-east"][0].set(true, 0)
	everyNode(t, nodes, 30*time.Second, "every region healthy again", func(s *regionstate.State) bool {
		return healthy(s, "eu-central") && healthy(s, "eu-west") && healthy(s, "us-east")
	})
	byRegion["us-east"][1].set(true, 0)
	everyNode(t, nodes, 30*time.Second, "us-east unhealthy (critical cluster)", func(s *regionstate.State) bool {
		return !healthy(s, "us-east") && healthy(s, "eu-west") && healthy(s, "eu-central")
	})
	byRegion["us-east"][0].set(true, 1)
	byRegion["us-east"][1].set(true, 1)

	// Drain: the change reaches all ten nodes; the figure is the time from
	// the API's answer to the last node's file.
	drained := func(s *regionstate.State) bool { r, _ := s.Region("eu-west"); return r.Draining }
	t0 := time.Now()
	if r := in.call(t, adminToken, "POST", "/v1/regions/eu-west/drain", "application/json", []byte(`{"reason":"db maintenance"}`), nil, nil); r.StatusCode != 200 {
		t.Fatalf("drain: %d %s", r.StatusCode, bodyOf(r))
	}
	everyNode(t, nodes, 30*time.Second, "eu-west draining", drained)
	t.Logf("FIGURE region-state publish->nodes ms=%d (drain of eu-west to all %d nodes' files)", time.Since(t0).Milliseconds(), len(nodes))
	if r := in.call(t, readToken, "POST", "/v1/regions/eu-west/drain", "application/json", []byte(`{}`), nil, nil); r.StatusCode != http.StatusForbidden {
		t.Fatalf("drain with a read token: %d", r.StatusCode)
	}
	if r := in.call(t, adminToken, "POST", "/v1/regions/mars/drain", "application/json", []byte(`{}`), nil, nil); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("drain of an unknown region: %d %s", r.StatusCode, bodyOf(r))
	}
	in.call(t, readToken, "GET", "/v1/regions", "", nil, nil, &rv)
	for _, h := range rv.Regions {
		if h.Draining != (h.Name == "eu-west") || (h.Name == "eu-west" && h.DrainReason != "db maintenance") {
			t.Fatalf("after the drain: %+v", h)
		}
	}
	if r := in.call(t, adminToken, "POST", "/v1/regions/eu-west/undrain", "application/json", nil, nil, nil); r.StatusCode != 200 {
		t.Fatalf("undrain: %d %s", r.StatusCode, bodyOf(r))
	}
	everyNode(t, nodes, 30*time.Second, "eu-west not draining", func(s *regionstate.State) bool { return !drained(s) })
	if r := in.call(t, adminToken, "POST", "/v1/regions/eu-west/undrain", "application/json", nil, nil, nil); r.StatusCode != http.StatusNotFound {
		t.Fatalf("undrain of a region not drained: %d %s", r.StatusCode, bodyOf(r))
	}

	// Lags: the monitor's pushes reach the document; bad ones are refused.
	obs := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	lag := func(token, platform, body string) int {
		return in.call(t, token, "POST", "/v1/platforms/"+platform+"/lag", "application/json", []byte(body), nil, nil).StatusCode
	}
	if c := lag(monitorToken, "accounts-db", `{"lags":[{"region":"us-east","lag_ms":750,"observed_at":"`+obs+`"},{"region":"eu-west","lag_ms":0,"observed_at":"`+obs+`"}]}`); c != http.StatusNoContent {
		t.Fatalf("lag push: %d", c)
	}
	future := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	for what, c := range map[string]struct {
		token, platform, body string
		want                  int
	}{
		"read token":     {readToken, "accounts-db", `{"lags":[{"region":"us-east","lag_ms":1,"observed_at":"` + obs + `"}]}`, http.StatusForbidden},
		"unknown region": {monitorToken, "accounts-db", `{"lags":[{"region":"mars","lag_ms":1,"observed_at":"` + obs + `"}]}`, http.StatusBadRequest},
		"unknown plat":   {monitorToken, "nope-db", `{"lags":[{"region":"us-east","lag_ms":1,"observed_at":"` + obs + `"}]}`, http.StatusBadRequest},
		"future time":    {monitorToken, "accounts-db", `{"lags":[{"region":"us-east","lag_ms":1,"observed_at":"` + future + `"}]}`, http.StatusBadRequest},
		"no time":        {monitorToken, "accounts-db", `{"lags":[{"region":"us-east","lag_ms":1}]}`, http.StatusBadRequest},
		"twice":          {monitorToken, "accounts-db", `{"lags":[{"region":"us-east","lag_ms":1,"observed_at":"` + obs + `"},{"region":"us-east","lag_ms":2,"observed_at":"` + obs + `"}]}`, http.StatusBadRequest},
		"negative":       {monitorToken, "accounts-db", `{"lags":[{"region":"us-east","lag_ms":-1,"observed_at":"` + obs + `"}]}`, http.StatusBadRequest},
		"unknown field":  {monitorToken, "accounts-db", `{"lags":[],"extra":1}`, http.StatusBadRequest},
		"monitor writer": {monitorToken, "accounts-db", `{"region":"us-east"}`, -1},
	} {
		if what == "monitor writer" {
			if r := in.call(t, monitorToken, "POST", "/v1/platforms/accounts-db/writer", "application/json", []byte(c.body), nil, nil); r.StatusCode != http.StatusForbidden {
				t.Errorf("writer switch with the monitor token: %d", r.StatusCode)
			}
			continue
		}
		if got := lag(c.token, c.platform, c.body); got != c.want {
			t.Errorf("lag push, %s: %d, want %d", what, got, c.want)
		}
	}
	everyNode(t, nodes, 30*time.Second, "accounts-db lag of us-east", func(s *regionstate.State) bool {
		p, _ := s.Platform("accounts-db")
		r, ok := p.Replica("us-east")
		return ok && r.LagMs == 750
	})

	// Writer switch with compare-and-set.
	var pw model.PlatformWriter
	if r := in.call(t, adminToken, "POST", "/v1/platforms/accounts-db/writer", "application/json", []byte(`{"region":"eu-west","expected_epoch":0}`), nil, &pw); r.StatusCode != 200 || pw.Epoch != 1 {
		t.Fatalf("writer switch: %d %+v", r.StatusCode, pw)
	}
	everyNode(t, nodes, 30*time.Second, "accounts-db written in eu-west at epoch 1", func(s *regionstate.State) bool {
		p, _ := s.Platform("accounts-db")
		return p.Writer == "eu-west" && p.WriterEpoch == 1
	})

	// Control plane down: every node keeps the last document.
	last := map[string]envelope.Version{}
	for _, n := range nodes {
		last[n.id.NodeID] = n.state(t).Version
	}
	_ = in.srv.Close()
	eventually(t, 30*time.Second, "every node to find the control plane unreachable", func() bool {
		for _, n := range nodes {
			if n.client.Control().State != nodeclient.ControlUnreachable {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		s := n.state(t)
		if s == nil || s.Version != last[n.id.NodeID] || !drainedNot(s) {
			t.Fatalf("node %s after the control plane went down: %+v, want version %s kept", n.id.NodeID, s, last[n.id.NodeID])
		}
	}
}

func drainedNot(s *regionstate.State) bool { r, ok := s.Region("eu-west"); return ok && !r.Draining }

// TestWriterSwitch: the explicit primary switch bumps the fencing epoch,
// refuses a stale expected_epoch, and is stored (it survives a restart of
// the control plane), in both stores.
func TestWriterSwitch(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		cfg := regionalConfig(t, b)
		in := start(t, cfg, "")
		in.waitLeader(t, 30*time.Second)
		rev := in.submit(t, regionalYAML)
		in.waitRollout(t, rev.ID, 60*time.Second, model.StateDone)
		sw := func(body string, out any) *http.Response {
			return in.call(t, adminToken, "POST", "/v1/platforms/ledger-db/writer", "application/json", []byte(body), nil, out)
		}
		var pw model.PlatformWriter
		if r := sw(`{"region":"eu-west"}`, &pw); r.StatusCode != 200 || pw.Epoch != 1 || pw.Region != "eu-west" || pw.By != "ops" {
			t.Fatalf("first switch: %d %+v", r.StatusCode, pw)
		}
		if r := sw(`{"region":"eu-central","expected_epoch":0}`, nil); r.StatusCode != http.StatusConflict {
			t.Fatalf("stale expected_epoch: %d %s", r.StatusCode, bodyOf(r))
		}
		if r := sw(`{"region":"eu-central","expected_epoch":1}`, &pw); r.StatusCode != 200 || pw.Epoch != 2 || pw.Region != "eu-central" {
			t.Fatalf("switch at epoch 1: %d %+v", r.StatusCode, pw)
		}
		if r := sw(`{"region":"us-east"}`, nil); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("a region without a replica: %d %s", r.StatusCode, bodyOf(r))
		}
		if r := sw(`{"region":"mars"}`, nil); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("an unknown region: %d %s", r.StatusCode, bodyOf(r))
		}
		if r := in.call(t, adminToken, "POST", "/v1/platforms/nope/writer", "application/json", []byte(`{"region":"eu-west"}`), nil, nil); r.StatusCode != http.StatusBadRequest {
			t.Fatalf("an unknown platform: %d %s", r.StatusCode, bodyOf(r))
		}
		// Stored: a restarted control plane has it, and goes on from it.
		_ = in.srv.Close()
		in = start(t, cfg, "")
		in.waitLeader(t, 30*time.Second)
		var ps struct {
			Platforms []model.PlatformState `json:"platforms"`
		}
		eventually(t, 30*time.Second, "the platforms after a restart", func() bool {
			in.call(t, readToken, "GET", "/v1/platforms", "", nil, nil, &ps)
			return len(ps.Platforms) == 2
		})
		if p := ps.Platforms[1]; p.Name != "ledger-db" || p.Writer != "eu-central" || p.WriterEpoch != 2 {
			t.Fatalf("ledger-db after a restart: %+v", p)
		}
		if r := sw(`{"region":"eu-west","expected_epoch":2}`, &pw); r.StatusCode != 200 || pw.Epoch != 3 {
			t.Fatalf("switch after a restart: %d %+v", r.StatusCode, pw)
		}
		s, _ := in.srv.Plane.RegionState()
		eventually(t, 30*time.Second, "the document to name the writer", func() bool {
			s, _ = in.srv.Plane.RegionState()
			if s == nil {
				return false
			}
			p, _ := s.Platform("ledger-db")
			return p.Writer == "eu-west" && p.WriterEpoch == 3
		})
		if lead := in.srv.Store.Leader(); s.Version.Epoch != lead.Epoch {
			t.Fatalf("document epoch %d, control epoch %d", s.Version.Epoch, lead.Epoch)
		}
	})
}
