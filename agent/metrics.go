package agent

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/bpf"
)

type metrics struct {
	xdpMode      *prometheus.GaugeVec
	syncEpoch    prometheus.Gauge
	syncSeq      prometheus.Gauge
	syncErrors   *prometheus.CounterVec
	snapRejected *prometheus.CounterVec
	denySeq      prometheus.Gauge
	denyRejected *prometheus.CounterVec
	handoffErrs  prometheus.Counter
	sockets      prometheus.Gauge
	vips         prometheus.Gauge
	ready        prometheus.Gauge
	proxyReady   prometheus.Gauge
	regionKept   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, a *Agent) *metrics {
	a.col = &bpfCollector{a: a}
	m := &metrics{
		xdpMode: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rampart_agent_xdp_mode",
			Help: "1 for the mode XDP runs in on each interface (driver, generic); generic is much slower."}, []string{"interface", "mode"}),
		syncEpoch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_synced_epoch",
			Help: "Epoch of the snapshot the BPF maps and VIPs are in line with."}),
		syncSeq: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_synced_sequence",
			Help: "Sequence of the snapshot the BPF maps and VIPs are in line with."}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rampart_agent_sync_errors_total",
			Help: "Failed sync steps, by stage (xdp, vips, addresses, limits, deny, sockets, anycast)."}, []string{"stage"}),
		snapRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rampart_agent_snapshot_rejected_total",
			Help: "Snapshot files the agent refused, by reason."}, []string{"reason"}),
		denySeq: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_deny_sequence",
			Help: "Sequence of the fast deny channel's list in force (0: none)."}),
		denyRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rampart_agent_deny_rejected_total",
			Help: "Deny files the agent refused, by reason."}, []string{"reason"}),
		handoffErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "rampart_agent_handoff_errors_total",
			Help: "Failed fetches of the proxy's sockets over the hand-off socket."}),
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_sockets_registered",
			Help: "Proxy sockets registered for steering."}),
		vips: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_vips",
			Help: "VIP addresses on the VIP interface (of the synced snapshot)."}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_ready",
			Help: "1 when XDP is attached everywhere and the maps are in line with the active snapshot."}),
		proxyReady: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_proxy_ready",
			Help: "1 when the proxy's /readyz answered 200 at the latest poll."}),
		regionKept: prometheus.NewGauge(prometheus.GaugeOpts{Name: "rampart_agent_region_decision_kept",
			Help: "1 while the region state is stale, absent or does not list the region, and the region input and drain keep their last decision."}),
	}
	for _, stage := range []string{"xdp", "vips", "addresses", "limits", "deny", "sockets", "anycast"} {
		m.syncErrors.WithLabelValues(stage) // present at 0, so rate() and alerts see them
	}
	reg.MustRegister(m.regionKept, m.xdpMode, m.syncEpoch, m.syncSeq, m.syncErrors, m.snapRejected, m.denySeq, m.denyRejected,
		m.handoffErrs, m.sockets, m.vips, m.ready, m.proxyReady,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rampart_agent_sync_age_seconds",
			Help: "Seconds since the maps were last confirmed in line with the active snapshot (-1: never)."},
			func() float64 { return a.syncAge().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rampart_agent_snapshot_age_seconds",
			Help: "Seconds since the synced snapshot was built (-1: none)."},
			func() float64 { return a.snapshotAge().Seconds() }),
		a.col)
	return m
}

var (
	descVerdicts = prometheus.NewDesc("rampart_agent_verdicts_total",
		"BPF verdicts and events by reason, summed over CPUs (XDP: pass*, drop*; sk_lookup: steered, steer_no_socket; sockops: conntrack_full). They survive agent restarts.",
		[]string{"reason"}, nil)
	descEntries = prometheus.NewDesc("rampart_agent_map_entries",
		"Entries in a BPF map (sources, conn_sources, deny_v4, deny_v6, vips, sockets).", []string{"map"}, nil)
	descCapacity = prometheus.NewDesc("rampart_agent_map_capacity",
		"Capacity of a BPF map.", []string{"map"}, nil)
	descPrograms = prometheus.NewDesc("rampart_agent_programs_loaded",
		"BPF programs loaded by this agent (XDP, sk_lookup, sockops).", nil, nil)
	descLinks = prometheus.NewDesc("rampart_agent_link_attached",
		"1 for each pinned BPF link in effect (xdp-driver-IF, xdp-generic-IF, sklookup-NETNS, sockops-CGROUP).", []string{"link"}, nil)
)

// bpfCollector reads the per-CPU counters and map fills at scrape time.
type bpfCollector struct {
	a *Agent

	mu    sync.Mutex
	at    time.Time
	stats bpf.Stats
}

func (c *bpfCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descVerdicts, descEntries, descCapacity, descPrograms, descLinks} {
		ch <- d
	}
}

func (c *bpfCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.a.bpfView()
	ch <- prometheus.MustNewConstMetric(descPrograms, prometheus.GaugeValue, float64(v.Programs))
	for _, l := range v.Links {
		ch <- prometheus.MustNewConstMetric(descLinks, prometheus.GaugeValue, 1, l)
	}
	for r, n := range v.Counters {
		ch <- prometheus.MustNewConstMetric(descVerdicts, prometheus.CounterValue, float64(n), r)
	}
	for name, m := range v.Maps {
		ch <- prometheus.MustNewConstMetric(descEntries, prometheus.GaugeValue, float64(m.Entries), name)
		if m.Capacity > 0 {
			ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(m.Capacity), name)
		}
	}
}

// statsEvery bounds how often the per-source table is read whole (64 MiB at
// the default size): scrapes and /status in between see the cached fill.
const statsEvery = 10 * time.Second

// cachedStats returns f.Stats(), read again when older than statsEvery.
func (c *bpfCollector) cachedStats(f *bpf.Filter) (bpf.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	small := c.stats.MaxSources > 0 && c.stats.MaxSources <= 1<<16 // cheap to read every time
	if !small && !c.at.IsZero() && time.Since(c.at) < statsEvery {
		return c.stats, nil
	}
	s, err := f.Stats()
	if err != nil {
		return s, err
	}
	c.stats, c.at = s, time.Now()
	return s, nil
}
