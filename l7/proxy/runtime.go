package proxy

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/l7/auth"
	"github.com/rampart-edge/rampart/l7/cluster"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/headerrule"
	"github.com/rampart-edge/rampart/l7/listener"
	"github.com/rampart-edge/rampart/l7/quota"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/stage"
)

// Runtime is everything the request path needs from one snapshot, built off
// the request path and never changed after it is published.
type Runtime struct {
	Snap      *snapshot.Snapshot
	limits    snapshot.Limits
	auth      *auth.Set
	quota     *quota.Limiter
	table     *route.Table
	screen    stage.Chain // before routing: the deny screen
	routes    []routeRT
	clusters  map[string]*cluster.Cluster
	slashes   route.SlashPolicy
	listeners map[string]*listenerRT
	activated time.Time
}

type routeRT struct {
	cfg       *snapshot.Route
	limits    *snapshot.Limits
	chain     stage.Chain // the route's stages, ending with fwd
	fwd       forwardStage
	headers   *headerrule.Rules // nil: no header rules (forward applies the response half)
	timeout   time.Duration
	splits    []split // cumulative weights out of 100
	maxTries  int
	retryOn   [2]uint64 // bitset of statuses 400..527 that may be retried
	idemKey   string    // header whose presence makes a write retryable
	safeRetry bool      // read route or idempotency: safe
	stats     *routeStats
}

type split struct {
	cum     int
	cluster *cluster.Cluster
}

type listenerRT struct {
	cfg   snapshot.Listener
	certs *listener.Certs
}

// pickCluster chooses the revision for one request by weighted random
// choice; nil for a body-routing route, which has no upstream.
func (r *routeRT) pickCluster(roll int) *cluster.Cluster {
	if len(r.splits) == 0 {
		return nil
	}
	for _, s := range r.splits {
		if roll < s.cum {
			return s.cluster
		}
	}
	return r.splits[len(r.splits)-1].cluster
}

func (r *routeRT) retryable(status int) bool {
	i := status - 400
	return i >= 0 && i < 128 && r.retryOn[i/64]&(1<<(i%64)) != 0
}

// runtimeEnv is what runtimes are built from besides the snapshot: state
// that outlives a runtime, and the proxy's place.
type runtimeEnv struct {
	proxy    *Proxy
	clusters *cluster.Set
	metrics  *Metrics
	deny     *atomic.Pointer[deny.List]
	region   string
	log      *slog.Logger
}

// buildRuntime compiles a verified snapshot into a runtime. It reads the
// listeners' certificate files; any error leaves the caller's active runtime
// untouched.
func buildRuntime(s *snapshot.Snapshot, env *runtimeEnv, prev *Runtime) (*Runtime, error) {
	c := s.Config
	table, err := route.NewTable(c.Routes)
	if err != nil {
		return nil, fmt.Errorf("build route table: %w", err)
	}
	rt := &Runtime{
		Snap:      s,
		limits:    c.Limits,
		table:     table,
		listeners: make(map[string]*listenerRT, len(c.Listeners)),
		activated: time.Now(),
	}
	if c.Routing.EncodedSlashes == "decode" {
		rt.slashes = route.DecodeEncodedSlashes
	}
	var prevClusters map[string]*cluster.Cluster
	if prev != nil {
		prevClusters = prev.clusters
	}
	rt.clusters = env.clusters.Build(c.Clusters, prevClusters)
	rt.routes = make([]routeRT, len(c.Routes))
	for i := range c.Routes {
		rt.routes[i] = newRouteRT(&c.Routes[i], rt.clusters, env.metrics)
		rt.routes[i].limits = &rt.limits
	}
	if err := buildPolicies(rt, env, prev); err != nil {
		return nil, err
	}
	for _, l := range c.Listeners {
		lr := &listenerRT{cfg: l}
		if l.TLS != nil {
			if lr.certs, err = listener.LoadCerts(l.TLS.Certificates); err != nil {
				rt.closePolicies()
				return nil, fmt.Errorf("listener %q: %w", l.Name, err)
			}
		}
		rt.listeners[l.Name] = lr
	}
	return rt, nil
}

func newRouteRT(r *snapshot.Route, clusters map[string]*cluster.Cluster, m *Metrics) routeRT {
	rr := routeRT{
		cfg:       r,
		timeout:   time.Duration(r.TimeoutMs) * time.Millisecond,
		maxTries:  1,
		safeRetry: r.RequestClass == "read" || r.Idempotency == "safe",
		stats:     m.route(r.ID),
	}
	rr.idemKey, _ = r.IdempotencyKeyHeader()
	cum := 0
	for _, sp := range r.TrafficSplit {
		if sp.Weight == 0 {
			continue
		}
		cum += sp.Weight
		rr.splits = append(rr.splits, split{cum: cum, cluster: clusters[sp.Revision]})
	}
	if rp := r.RetryPolicy; rp != nil {
		rr.maxTries = rp.MaxAttempts
		for _, st := range rp.RetryableStatuses {
			if i := st - 400; i >= 0 && i < 128 {
				rr.retryOn[i/64] |= 1 << (i % 64)
			}
		}
	}
	return rr
}
