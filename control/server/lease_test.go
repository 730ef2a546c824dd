package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// leaseYAML is regionalYAML with a global quota policy of 500,000 req/s.
const leaseYAML = regionalYAML + `quota_policies:
  - id: api-global
    key: [client_ip]
    store: local
    global: {rate_per_second: 500000, burst: 50000, floor_share_percent: 10, lease_ttl_ms: 10000, rebalance_ms: 500}
`

// leaseNode is an in-process node whose simulated proxy tried to admit
// requests of api-global at a rate the test sets; its real node client
// reports the demand and writes the region state to its file.
type leaseNode struct {
	id  model.Identity
	dir string
	cl  *nodeclient.Client

	mu    sync.Mutex
	rate  float64   // attempts per second from since on
	count float64   // attempts up to since
	since time.Time // when rate was set
}

func newLeaseNode(t *testing.T, url string, id model.Identity, rate float64) *leaseNode {
	n := &leaseNode{id: id, dir: t.TempDir(), rate: rate, since: time.Now()}
	n.cl = newRegionClient(t, url, id, n.dir, n.observe, 100*time.Millisecond)
	runClient(t, n.cl)
	return n
}

func (n *leaseNode) observe(context.Context) (nodeclient.Observation, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	v := n.cl.Status().Downloaded
	attempts := n.count + n.rate*time.Since(n.since).Seconds()
	return nodeclient.Observation{Active: v, Ready: v.Epoch > 0,
		Clusters:      []model.ClusterHealth{{Name: "accounts", Healthy: 1, Total: 1}},
		QuotaAttempts: map[string]uint64{"api-global": uint64(attempts)}}, nil
}

func (n *leaseNode) setRate(r float64) {
	n.mu.Lock()
	now := time.Now()
	n.count += n.rate * now.Sub(n.since).Seconds()
	n.rate, n.since = r, now
	n.mu.Unlock()
}

func (n *leaseNode) state(t *testing.T) *regionstate.State {
	return regionStateIn(t, n.dir, n.id.NodeID)
}

// TestGlobalQuotaLeases: six nodes in three regions report their demand
// of a global policy (500,000 req/s); every node's document carries the
// three leases, split by demand over the floors, never above the global
// rate in total, with the ready node count; a demand shift moves the
// leases (FIGURE: the time from the shift to every node's file).
func TestGlobalQuotaLeases(t *testing.T) {
	b := backend{name: "embedded", dir: t.TempDir()}
	in := start(t, regionalConfig(t, b), "")
	in.waitLeader(t, 30*time.Second)
	var nodes []*leaseNode
	byRegion := map[string][]*leaseNode{}
	demand := map[string]float64{"us-east": 300_000, "eu-west": 100_000, "eu-central": 100_000}
	for i, r := range []string{"us-east", "us-east", "eu-west", "eu-west", "eu-central", "eu-central"} {
		n := newLeaseNode(t, in.url, model.Identity{NodeID: fmt.Sprintf("%s-%d", r, i), Region: r, Zone: r + "-1a"}, demand[r]/2)
		nodes = append(nodes, n)
		byRegion[r] = append(byRegion[r], n)
	}
	rev := in.submit(t, leaseYAML)
	in.waitRollout(t, rev.ID, 60*time.Second, model.StateDone)

	leases := func(s *regionstate.State) (map[string]regionstate.QuotaLease, uint64) {
		out, sum := map[string]regionstate.QuotaLease{}, uint64(0)
		for _, r := range []string{"us-east", "eu-west", "eu-central"} {
			if l, ok := s.QuotaLease("api-global", r); ok {
				out[r] = l
				sum += l.PerSecond
			}
		}
		return out, sum
	}
	everyNodeState := func(within time.Duration, what string, cond func(map[string]regionstate.QuotaLease) bool) {
		t.Helper()
		eventually(t, within, what+" on every node", func() bool {
			for _, n := range nodes {
				s := n.state(t)
				if s == nil {
					return false
				}
				ls, sum := leases(s)
				if sum > 500_000 {
					t.Fatalf("node %s: leases sum to %d, above the global 500000: %+v", n.id.NodeID, sum, ls)
				}
				if len(ls) != 3 || !cond(ls) {
					return false
				}
			}
			return true
		})
	}
	// us-east asks for 60% of the demand: 50,000 floor + 60% of 350,000.
	near := func(got uint64, want float64) bool { return float64(got) > want*0.9 && float64(got) < want*1.1 }
	everyNodeState(30*time.Second, "leases by demand (us-east about 260,000/s)", func(ls map[string]regionstate.QuotaLease) bool {
		us, eu := ls["us-east"], ls["eu-west"]
		return near(us.PerSecond, 260_000) && near(eu.PerSecond, 120_000) && us.Nodes == 2 && eu.Nodes == 2 &&
			us.Expires.After(time.Now()) && us.Burst > 0
	})

	// The shift: eu-west now asks for 60%.
	t0 := time.Now()
	for _, n := range byRegion["us-east"] {
		n.setRate(50_000)
	}
	for _, n := range byRegion["eu-west"] {
		n.setRate(150_000)
	}
	everyNodeState(30*time.Second, "leases after the shift (eu-west about 260,000/s)", func(ls map[string]regionstate.QuotaLease) bool {
		return near(ls["eu-west"].PerSecond, 260_000) && near(ls["us-east"].PerSecond, 120_000)
	})
	took := time.Since(t0)
	var api struct {
		Leases []struct {
			Policy, Region string
			PerSecond      uint64 `json:"per_second"`
		} `json:"leases"`
	}
	if r := in.call(t, readToken, "GET", "/v1/quota/leases", "", nil, nil, &api); r.StatusCode != 200 || len(api.Leases) != 3 || api.Leases[0].Policy != "api-global" || api.Leases[0].Region != "eu-central" {
		t.Fatalf("GET /v1/quota/leases: %d %+v", r.StatusCode, api)
	}
	t.Logf("FIGURE global quota lease rebalance: demand shift -> new leases in all %d nodes' region-state files: %d ms (rebalance_ms 500, node reports every 100 ms; go test -count=1 -v -run TestGlobalQuotaLeases ./control/server)",
		len(nodes), took.Milliseconds())
}
