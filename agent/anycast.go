package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// The anycast inputs the agent feeds, by name (anycast/README.md). Inputs of
// kind http are run by the announcer itself; any other input stays down.
const (
	InputProxyReady    = "proxy_ready"    // bool: the proxy's /readyz answers 200
	InputXDP           = "xdp"            // bool: XDP attached everywhere and the maps in line with the active snapshot
	InputSnapshotFresh = "snapshot_fresh" // age: the active snapshot's creation time
	InputUpstreams     = "upstreams"      // share: healthy upstream endpoints over all of them
)

var fedKinds = map[string]string{InputProxyReady: anycast.KindBool, InputXDP: anycast.KindBool,
	InputSnapshotFresh: anycast.KindAge, InputUpstreams: anycast.KindShare, InputRegion: anycast.KindBool}

// anycastFeed builds the announcer once the active snapshot has VIPs, feeds
// its inputs and turns the snapshot's VIPs into its VIPs.
type anycastFeed struct {
	a    *Agent
	base anycast.Config

	mu      sync.Mutex
	ann     *anycast.Announcer
	reg     *prometheus.Registry // the announcer's metrics, served with the agent's
	vips    []anycast.VIP        // in force
	failed  []anycast.VIP        // a list New or Reconfigure refused (not retried until it changes)
	created time.Time
	warned  map[string]bool
}

func newAnycastFeed(a *Agent, c anycast.Config) *anycastFeed {
	c.Normalize()
	for _, in := range c.Inputs {
		if k, ok := fedKind(in.Name); (!ok || k != in.Kind) && in.Kind != anycast.KindHTTP {
			a.log.Error("anycast: input is not one the agent feeds; it stays down and the VIPs that need it stay withdrawn",
				"input", in.Name, "kind", in.Kind, "fed", "proxy_ready (bool), xdp (bool), snapshot_fresh (age), upstreams (share), region (bool), region_serves_tenants[:GROUP] (bool)")
		}
	}
	return &anycastFeed{a: a, base: c, warned: map[string]bool{}}
}

func (f *anycastFeed) has(name string) bool {
	return slices.ContainsFunc(f.base.Inputs, func(in anycast.Input) bool { k, ok := fedKind(name); return in.Name == name && ok && in.Kind == k })
}

// fedKind is the kind of an input the agent feeds, by name.
func fedKind(name string) (string, bool) {
	if _, ok := groupInput(name); ok {
		return anycast.KindBool, true
	}
	k, ok := fedKinds[name]
	return k, ok
}

// anycastVIPs turns the snapshot's VIP addresses into announced prefixes:
// a configured VIP that equals or covers some of them is announced as
// configured (its attributes and inputs); every other address as a /32 or
// /128 with the global inputs. Configured VIPs covering no address are
// not announced (returned in unused): this node does not serve them.
func anycastVIPs(conf []anycast.VIP, addrs []netip.Addr) (out []anycast.VIP, unused []string) {
	covered := map[netip.Addr]bool{}
	for _, v := range conf {
		p, err := netip.ParsePrefix(v.Prefix)
		if err != nil {
			unused = append(unused, v.Prefix)
			continue
		}
		n := 0
		for _, a := range addrs {
			if p.Contains(a) {
				covered[a] = true
				n++
			}
		}
		if n == 0 {
			unused = append(unused, v.Prefix)
			continue
		}
		out = append(out, v)
	}
	for _, a := range addrs {
		if !covered[a] {
			out = append(out, anycast.VIP{Prefix: netip.PrefixFrom(a, a.BitLen()).String()})
		}
	}
	slices.SortFunc(out, func(x, y anycast.VIP) int { return strings.Compare(x.Prefix, y.Prefix) })
	return out, unused
}

// update follows the active snapshot: its creation time, and its VIPs into
// the announcer's (created at the first non-empty list).
func (f *anycastFeed) update(act *activeSnap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vips, unused := anycastVIPs(f.base.VIPs, act.l4.Addrs)
	for _, u := range unused {
		if !f.warned[u] {
			f.warned[u] = true
			f.a.log.Warn("anycast: configured VIP covers none of the snapshot's VIPs; not announced", "prefix", u)
		}
	}
	switch {
	case len(vips) == 0:
		if f.ann != nil && !f.warned[""] {
			f.warned[""] = true
			f.a.log.Warn("anycast: the snapshot has no VIPs; keeping the announced ones (withdrawing every VIP at once is refused)")
		}
	case slices.EqualFunc(vips, f.vips, vipEqual) || slices.EqualFunc(vips, f.failed, vipEqual):
	default:
		cfg := f.base
		cfg.VIPs = vips
		var err error
		if f.ann == nil {
			err = f.start(cfg)
		} else {
			err = f.ann.Reconfigure(cfg)
		}
		if err != nil {
			f.failed = vips
			f.a.m.syncErrors.WithLabelValues("anycast").Inc()
			f.a.log.Error("anycast: VIPs not applied", "vips", len(vips), "err", err)
		} else {
			f.vips, f.failed, f.warned[""] = vips, nil, false
			f.a.log.Info("anycast: VIPs follow the snapshot", "vips", prefixes(vips))
		}
	}
	if f.ann != nil && f.has(InputSnapshotFresh) && !act.snap.CreatedAt.Equal(f.created) {
		f.created = act.snap.CreatedAt
		_ = f.ann.SetTime(InputSnapshotFresh, act.snap.CreatedAt)
	}
}

func vipEqual(x, y anycast.VIP) bool { return fmt.Sprint(x) == fmt.Sprint(y) }

func prefixes(v []anycast.VIP) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = x.Prefix
	}
	return out
}

// start creates and starts the announcer; callers hold mu. Its metrics go
// to a registry of its own, so a failed start leaves nothing registered
// (Stop after a failed Start would not return).
func (f *anycastFeed) start(cfg anycast.Config) error {
	reg := prometheus.NewRegistry()
	opts := anycast.Options{Registerer: reg, Logger: f.a.log}
	if f.a.rs != nil {
		opts.Control = f.a.controlView
	}
	ann, err := anycast.New(cfg, opts)
	if err != nil {
		return err
	}
	if err := ann.SetDrains(anycast.DrainOperator, f.a.drains.list()); err != nil {
		return err
	}
	if f.has(InputRegion) {
		_ = ann.SetFunc(InputRegion, f.a.rk.regionHealthy)
	}
	if f.has(InputXDP) {
		_ = ann.SetFunc(InputXDP, f.a.filtering)
	}
	for _, in := range cfg.Inputs {
		if _, ok := groupInput(in.Name); ok && f.has(in.Name) {
			name := in.Name
			_ = ann.SetFunc(name, func() (bool, string) { return f.a.regionServes(name) })
		}
	}
	if err := ann.Start(context.Background()); err != nil {
		return err
	}
	f.ann, f.reg, f.created = ann, reg, time.Time{}
	return nil
}

// Gather serves the announcer's metrics (none before it exists).
func (f *anycastFeed) Gather() ([]*dto.MetricFamily, error) {
	f.mu.Lock()
	reg := f.reg
	f.mu.Unlock()
	if reg == nil {
		return nil, nil
	}
	return reg.Gather()
}

func (f *anycastFeed) announcer() *anycast.Announcer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ann
}

func (f *anycastFeed) handler() http.Handler {
	if ann := f.announcer(); ann != nil {
		return ann.Handler()
	}
	return nil
}

// stop drains every announced VIP and shuts the sessions down.
func (f *anycastFeed) stop() error {
	ann := f.announcer()
	if ann == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(f.base.Drain.TimeMs)*time.Millisecond+10*time.Second)
	defer cancel()
	f.a.log.Info("anycast: draining, then shutting BGP down", "drain_ms", f.base.Drain.TimeMs)
	return ann.Stop(ctx)
}

func (f *anycastFeed) setProxyReady(ready bool, detail string) {
	if ann := f.announcer(); ann != nil && f.has(InputProxyReady) {
		_ = ann.SetUp(InputProxyReady, ready, detail)
	}
}

// pollUpstreams reads the proxy's rampart_endpoint_healthy gauges and gives
// the upstreams input healthy/total over every endpoint of the active
// snapshot's clusters (routes are not bound to listeners, so every VIP
// reaches every cluster).
func (f *anycastFeed) pollUpstreams(ctx context.Context, c *http.Client, url string) {
	ann := f.announcer()
	if ann == nil || !f.has(InputUpstreams) {
		return
	}
	f.a.mu.Lock()
	act := f.a.active
	f.a.mu.Unlock()
	if act == nil {
		return
	}
	gauges, err := fetchHealth(ctx, c, url)
	if err != nil {
		_ = ann.SetShare(InputUpstreams, 0, 0)
		return
	}
	h, t := upstreamShare(act.snap.Config, gauges, f.a.c.Region)
	_ = ann.SetShare(InputUpstreams, h, t)
}

type endpointKey struct{ cluster, addr string }

func fetchHealth(ctx context.Context, c *http.Client, url string) (map[endpointKey]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	return parseHealth(io.LimitReader(resp.Body, 64<<20))
}

// parseHealth extracts rampart_endpoint_healthy{cluster,endpoint} from a
// Prometheus text exposition.
func parseHealth(r io.Reader) (map[endpointKey]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("proxy metrics: %w", err)
	}
	out := map[endpointKey]float64{}
	if fam := fams["rampart_endpoint_healthy"]; fam != nil {
		for _, m := range fam.GetMetric() {
			var k endpointKey
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "cluster":
					k.cluster = l.GetValue()
				case "endpoint":
					k.addr = l.GetValue()
				}
			}
			out[k] = m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// upstreamShare counts the endpoints of the snapshot's clusters (of region,
// when set; endpoints without a region count everywhere) and the healthy
// ones: a gauge of 1, or no health check at all (the proxy then treats the
// endpoint as healthy). A checked endpoint without a gauge yet is not.
func upstreamShare(c *snapshot.Config, gauges map[endpointKey]float64, region string) (healthy, total int) {
	for _, cl := range c.Clusters {
		for _, ep := range cl.Endpoints {
			if region != "" && ep.Region != "" && ep.Region != region {
				continue
			}
			total++
			if v, ok := gauges[endpointKey{cl.Name, ep.Address}]; ok {
				if v == 1 {
					healthy++
				}
			} else if cl.HealthCheck == nil {
				healthy++
			}
		}
	}
	return healthy, total
}
