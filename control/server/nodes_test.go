package server_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
	"github.com/rampart-edge/rampart/l7/denywatch"
	"github.com/rampart-edge/rampart/l7/snapdir"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// fakeProxy stands in for the proxy (l7/proxy is not for control/ to
// import): the real snapshot directory watcher with a target that records
// what it applied, and the real deny file watcher.
type fakeProxy struct {
	mu      sync.Mutex
	active  snapshot.Version
	applied []snapshot.Version
	at      map[snapshot.Version]time.Time
	deny    *denywatch.Watcher
	watch   *snapdir.Watcher
	refuse  func(snapshot.Version) error // Apply fails with it, like a proxy that cannot build a snapshot
}

func (f *fakeProxy) Apply(s *snapshot.Snapshot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		if err := f.refuse(s.Version); err != nil {
			return err
		}
	}
	f.active = s.Version
	f.applied = append(f.applied, s.Version)
	if f.at == nil {
		f.at = map[snapshot.Version]time.Time{}
	}
	f.at[s.Version] = time.Now()
	return nil
}
func (f *fakeProxy) SetSourceVersions(_, _ snapshot.Version) {}
func (f *fakeProxy) RejectSnapshot(string)                   {}

func (f *fakeProxy) Active() snapshot.Version {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

func (f *fakeProxy) Applied() []snapshot.Version {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]snapshot.Version(nil), f.applied...)
}

func (f *fakeProxy) AppliedAt(v snapshot.Version) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at[v]
}

// node is a simulated node: a fake proxy fed by the real watchers, and a
// nodeclient reporting synthetic traffic whose error rate errRate picks
// by active version.
type node struct {
	id       model.Identity
	dir      string
	proxy    *fakeProxy
	client   *nodeclient.Client
	stop     func()
	stopProx func()
	report   time.Duration // node client's report interval
	swapWait time.Duration // how long the client waits for a swap before it reports; 0: its default
	poll     time.Duration // snapshot dir poll period
	agent    string        // the anycast agent's admin URL ("": none)

	mu      sync.Mutex
	errRate func(snapshot.Version) float64
	unready func(snapshot.Version) bool
	reqs    uint64
	errs    uint64
}

func newNode(t *testing.T, url string, id model.Identity) *node {
	return newNodeTuned(t, url, id, 50*time.Millisecond, 20*time.Millisecond)
}

// newNodeTuned is newNode with the node client's report interval and the
// snapshot directory's poll period given (the defaults are 5s and 250ms).
func newNodeTuned(t *testing.T, url string, id model.Identity, report, poll time.Duration) *node {
	n := &node{id: id, dir: t.TempDir(), report: report, poll: poll}
	if report >= time.Minute {
		// The report after a hand-over is the only one for a long time: it
		// must wait for the proxy to swap however long a busy machine takes,
		// not report the old version after the client's 5 s default.
		n.swapWait = time.Minute
	}
	n.startProxy(t)
	n.startClient(t, url)
	return n
}

// startProxy (re)starts the fake proxy: it serves the last-known-good
// first, then watches the directory.
func (n *node) startProxy(t *testing.T) {
	p := &fakeProxy{}
	w := &snapdir.Watcher{Dir: filepath.Join(n.dir, "snapshots"), StateDir: filepath.Join(n.dir, "state"),
		PublicKey: testPub, Interval: n.poll, Target: p, Log: logger()}
	_ = w.LoadLastKnownGood()
	p.watch = w
	p.deny = &denywatch.Watcher{Path: filepath.Join(n.dir, "deny.json"), PublicKey: testPub, Interval: 50 * time.Millisecond, Logger: logger()}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	go func() { defer wg.Done(); _ = p.deny.Run(ctx) }()
	n.mu.Lock()
	n.proxy = p
	n.mu.Unlock()
	n.stopProx = func() { cancel(); wg.Wait() }
	t.Cleanup(n.stopProx)
}

func (n *node) startClient(t *testing.T, url string) {
	c, err := nodeclient.New(nodeclient.Config{URL: url, Token: nodeToken, Identity: n.id, PublicKey: testPub,
		SnapshotDir: filepath.Join(n.dir, "snapshots"), DenyFile: filepath.Join(n.dir, "deny.json"),
		Reporter: n.observe, AgentStatusURL: n.agent, ReportInterval: n.report, SwapWait: n.swapWait, WatchTimeout: 2 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Logger: logger()})
	if err != nil {
		t.Fatal(err)
	}
	n.client = c
	n.stop = runClient(t, c)
}

// runClient runs c until the returned stop is called or the test ends
// (stop may be called more than once); stop waits for Run to return.
func runClient(t *testing.T, c *nodeclient.Client) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func (n *node) fake() *fakeProxy {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proxy
}

// observe serves 40 synthetic requests per report.
func (n *node) observe(context.Context) (nodeclient.Observation, error) {
	p := n.fake()
	v := p.Active()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reqs += 40
	if n.errRate != nil {
		n.errs += uint64(40 * n.errRate(v))
	}
	ready := v != snapshot.Version{}
	if n.unready != nil && n.unready(v) {
		ready = false
	}
	o := nodeclient.Observation{Active: v, Ready: ready, Requests: n.reqs, Errors: n.errs,
		LatencySeconds: float64(n.reqs) * 0.002, LatencyCount: n.reqs}
	if r := p.watch.LastRefusal(); r != nil { // what the proxy's /status shows as last_refusal
		o.Refused, o.RefusedReason = r.Version, r.Reason+": "+r.Error
	}
	return o, nil
}

func (n *node) setErrRate(f func(snapshot.Version) float64) {
	n.mu.Lock()
	n.errRate = f
	n.mu.Unlock()
}

// fleet makes nodes: canary (eu-1a), zone (eu-1a), region (eu-1b),
// two elsewhere (us-1a), so each stage has its own nodes.
func fleet(t *testing.T, url string) map[string]*node {
	ids := []model.Identity{
		{NodeID: "canary-1", Region: "eu", Zone: "eu-1a", Cohort: "canary"},
		{NodeID: "zone-1", Region: "eu", Zone: "eu-1a"},
		{NodeID: "region-1", Region: "eu", Zone: "eu-1b"},
		{NodeID: "us-1", Region: "us", Zone: "us-1a"},
		{NodeID: "us-2", Region: "us", Zone: "us-1a"},
	}
	out := map[string]*node{}
	for _, id := range ids {
		out[id.NodeID] = newNode(t, url, id)
	}
	return out
}

func waitActive(t *testing.T, nodes map[string]*node, v snapshot.Version, within time.Duration) {
	t.Helper()
	eventually(t, within, "every node to run "+v.String(), func() bool {
		for _, n := range nodes {
			if n.fake().Active() != v {
				return false
			}
		}
		return true
	})
}

func has(vs []snapshot.Version, v snapshot.Version) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// runUntil runs a client until done holds (for at most 30 s), then stops
// it and waits for Run to return.
func runUntil(t *testing.T, c *nodeclient.Client, what string, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { defer close(ended); _ = c.Run(ctx) }()
	defer func() { cancel(); <-ended }()
	eventually(t, 30*time.Second, what, done)
}
