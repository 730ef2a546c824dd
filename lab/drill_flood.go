package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/lab/demo"
	"github.com/rampart-edge/rampart/lab/pktgen"
)

func init() { Register("flood", drillFlood) }

// The flood drill's addresses. IPv4 on the client link (203.0.113.0/24,
// the client's own sources are .10–.17): the router takes them from the
// client's interface like the client's own. IPv6 from /64s of fd00:c::/48
// beside the client's (fd00:c::/64): XDP limits IPv6 per /64, so the
// flood is 4 /64s and the probes 16, and the client's own v6 sources are
// one other "source".
var floodFamilies = []floodFamily{
	{name: "IPv4", figure: "", flood: "203.0.113.128/30", deny: "203.0.113.128/26", probe: "203.0.113.160/27", sequential: true},
	{name: "IPv6", figure: "IPv6 ", flood: "fd00:c:0:100::/62", deny: "fd00:c:0:100::/56", probe: "fd00:c:0:1c0::/60"},
}

// floodFamily is one address family's run of the drill.
type floodFamily struct {
	name, figure       string // "IPv4"; the prefix of its figure names ("" for IPv4, "IPv6 ")
	flood, deny, probe string // the flooding sources (4 limited sources), the deny (both), the probes (denied, not flooding)
	sequential         bool   // sources in turn (IPv4); at random over the /64s (IPv6)
}

const (
	floodSources = 4               // limited sources in each family's flood prefix
	floodRate    = 32000           // SYN/s: 8000 per source, ~2000 per source and site behind ECMP
	floodFor     = 3 * time.Second // the flood phase
	probeRate    = 200             // SYN/s to each site: a 5 ms resolution
	denyWatch    = 3 * time.Second // probing after the deny is published
	denyBudget   = time.Second     // the deny must take effect on every site within it
)

// drillFlood: one source range SYN-floods a VIP from the client
// namespace (spoofed with lab/pktgen) while other clients make requests.
// XDP on every site drops the flood at its per-source SYN limit (the
// agents' verdict counters show it) and the other clients are served.
// Then an operator denies the flooding range through the control plane
// (`rampart control deny add cidr`), and the drill measures, per site,
// when the deny took effect: probes from denied (non-flooding) addresses
// are sent from the router straight to each site's link (its MAC, the
// VIP as destination) every 5 ms, and the site's SYN-ACKs are captured on
// the router's side of that link; the last probe a site still answered
// after the publication is when the deny reached its XDP. Every site must
// stop answering within 1 s. The deny is removed at the end and every
// site answers probes again. IPv4 first, then IPv6.
func drillFlood(ctx context.Context, l *Lab, r *Report) error {
	if err := l.WaitConverged(ctx, time.Minute); err != nil {
		return fmt.Errorf("the lab is not converged before the drill: %w", err)
	}
	for _, fam := range floodFamilies {
		if err := l.floodOne(ctx, r, fam); err != nil {
			return fmt.Errorf("%s: %w", fam.name, err)
		}
	}
	return nil
}

// floodOne runs the drill for one address family.
func (l *Lab) floodOne(ctx context.Context, r *Report, fam floodFamily) error {
	v6 := fam.name == "IPv6"
	var vip netip.Addr
	for _, v := range l.VIPs {
		if a, err := netip.ParseAddr(v); err == nil && a.Is6() == v6 {
			vip = a
			break
		}
	}
	if !vip.IsValid() {
		return fmt.Errorf("the lab has no %s VIP (VIPs %v)", fam.name, l.VIPs)
	}
	clients := l.Client.V4
	if v6 {
		clients = l.Client.V6
	}
	fig := func(name string, v any) { r.Figure(fam.figure+name, v) }
	dst := netip.AddrPortFrom(vip, 80)
	flood := pktgen.Config{NetNS: l.Client.Netns, SrcCIDR: netip.MustParsePrefix(fam.flood), Sequential: fam.sequential,
		Dst: dst, Kind: pktgen.SYN, Rate: floodRate, Workers: 1, QdiscBypass: true, Seed: uint64(time.Now().UnixNano())}
	hop, err := pktgen.NextHop(l.Client.Netns, vip)
	if err != nil {
		return fmt.Errorf("the client's route to %v: %w", vip, err)
	}
	flood.Iface, flood.DstMAC = hop.Iface, hop.MAC

	// Phase 1: the flood under client traffic.
	c0, err := l.verdicts(ctx)
	if err != nil {
		return err
	}
	tr := l.StartTraffic(ctx, TrafficOptions{Rate: 50, Sources: clients})
	r.Step("flooding %v from %s (SYN, %d/s, %d limited sources) for %s; client requests from %d other sources at 50/s",
		dst, fam.flood, floodRate, floodSources, floodFor, len(clients))
	fc := flood
	fc.Duration = floodFor
	rep, err := pktgen.Run(ctx, fc)
	if err != nil {
		tr.Stop()
		return fmt.Errorf("flood: %w", err)
	}
	c1, err := l.verdicts(ctx)
	res := tr.Stop()
	if err != nil {
		return err
	}
	r.Step("flood done: %s", rep)
	fig("flood: frames sent", rep.Sent)
	fig("flood: rate achieved (pps)", int(rep.Rate))
	var errs []error
	drops := uint64(0)
	var per []string
	for _, s := range l.Sites {
		syn, pps := c1.delta(c0, s.Name, "drop_syn"), c1.delta(c0, s.Name, "drop_pps")
		drops += syn + pps
		per = append(per, fmt.Sprintf("%s=%d", s.Name, syn+pps))
		fig("flood: "+s.Name+" XDP drops (drop_syn + drop_pps)", fmt.Sprintf("%d + %d", syn, pps))
		if syn+pps == 0 {
			errs = append(errs, fmt.Errorf("site %s dropped none of the flood at its limits", s.Name))
		}
	}
	allow := limitAllowance(demo.DefaultLimits, floodSources, len(l.Sites), rep.Elapsed)
	fig("flood: XDP drops, all sites", drops)
	fig("flood: at most admitted by the per-source SYN limits (4 sources × sites × (burst + rate × time))", allow)
	// Everything above the allowance should be dropped; a quarter of it
	// may be lost on the way instead (veth backlogs on a busy box).
	if want := (rep.Sent - min(rep.Sent, allow)) * 3 / 4; drops < want {
		errs = append(errs, fmt.Errorf("XDP dropped %d of %d flood frames (%s); the SYN limits admit at most %d, so at least %d (75%% of the rest) should be dropped",
			drops, rep.Sent, strings.Join(per, ", "), allow, want))
	}
	ok, lost := res.Requests()-res.Lost(), res.Lost()
	fig("flood: other clients' requests served", ok)
	fig("flood: other clients' requests failed", lost)
	if ok == 0 || lost*100 > res.Requests() {
		errs = append(errs, fmt.Errorf("other clients under the flood: %d requests served, %d failed (first: %s)", ok, lost, res.FirstError()))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// Phase 2: the deny, measured per site while the flood goes on.
	p, err := l.startProbes(ctx, dst, netip.MustParsePrefix(fam.probe), fam.sequential)
	if err != nil {
		return err
	}
	defer p.stop()
	if err := p.waitAnswered(ctx, time.Time{}, 30*time.Second); err != nil {
		return fmt.Errorf("before the deny: %w", err)
	}
	r.Step("probes from %s (denied, not flooding) to %v answered by every site, straight from the router (%d/s each)", fam.probe, dst, probeRate)
	fctx, stopFlood := context.WithCancel(ctx)
	fc.Duration = time.Minute
	floodDone := make(chan error, 1)
	go func() { _, err := pktgen.Run(fctx, fc); floodDone <- err }()
	var floodOnce sync.Once
	endFlood := func() { floodOnce.Do(func() { stopFlood(); <-floodDone }) }
	defer endFlood()
	c2, err := l.verdicts(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if out, err := l.ControlCLI(ctx, "deny", "add", "cidr", fam.deny, "-ttl", "10m", "-reason", "lab flood drill"); err != nil {
		return fmt.Errorf("deny add: %w: %s", err, out)
	}
	defer func() {
		// Leave the lab as it was: remove the deny, wait until every site
		// answers the probes again.
		if out, err := l.ControlCLI(context.WithoutCancel(ctx), "deny", "remove", "cidr", fam.deny); err != nil {
			r.Step("deny remove failed: %v: %s", err, out)
			return
		}
		t1 := time.Now()
		if err := p.waitAnswered(context.WithoutCancel(ctx), t1, 30*time.Second); err != nil {
			r.Step("after the deny was removed: %v", err)
			return
		}
		r.Step("deny removed; every site answers probes from %s again (%s)", fam.probe, time.Since(t1).Round(time.Millisecond))
	}()
	r.Step("published deny %s through the control plane (rampart control deny add: %s); probing for %s",
		fam.deny, time.Since(t0).Round(time.Millisecond), denyWatch)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(denyWatch):
	}
	c3, err := l.verdicts(ctx)
	endFlood()
	if err != nil {
		return err
	}
	worst := time.Duration(0)
	for _, s := range l.Sites {
		d, answered, sent := p.effect(s.Name, t0)
		fig("deny: "+s.Name+" effective after", d)
		fig("deny: "+s.Name+" drop_deny while probing", c3.delta(c2, s.Name, "drop_deny"))
		worst = max(worst, d)
		if d >= denyBudget {
			errs = append(errs, fmt.Errorf("site %s still answered a denied probe %s after the deny was published (budget %s)", s.Name, d.Round(time.Millisecond), denyBudget))
		}
		if c3.delta(c2, s.Name, "drop_deny") == 0 {
			errs = append(errs, fmt.Errorf("site %s counted no drop_deny after the deny", s.Name))
		}
		if sent-min(sent, answered) < probeRate { // at least 1 s of probes after the last answer
			errs = append(errs, fmt.Errorf("site %s: only %d of %d probes unanswered after the deny", s.Name, sent-answered, sent))
		}
	}
	fig("deny: slowest site", worst)
	r.Step("deny in force on every site (slowest %s)", worst.Round(time.Millisecond))
	return errors.Join(errs...)
}

// limitAllowance is the most SYNs the per-source limits admit from n
// sources at each of sites sites during d (a full burst each, then the
// rate).
func limitAllowance(lim snapshot.L4Limits, n, sites int, d time.Duration) uint64 {
	per := float64(lim.SYNBurst) + float64(lim.SYNPerSecond)*d.Seconds()
	return uint64(per * float64(n*sites))
}

// verdictCounts are the agents' XDP verdict counters: site → reason → count.
type verdictCounts map[string]map[string]uint64

func (v verdictCounts) delta(before verdictCounts, site, reason string) uint64 {
	return v[site][reason] - min(v[site][reason], before[site][reason])
}

// verdicts reads rampart_agent_verdicts_total from every site's agent.
func (l *Lab) verdicts(ctx context.Context) (verdictCounts, error) {
	out := verdictCounts{}
	for _, s := range l.Sites {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.AgentAdmin+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		resp, err := s.HTTP().Do(req)
		if err != nil {
			return nil, fmt.Errorf("site %s agent metrics: %w", s.Name, err)
		}
		m, err := parseVerdicts(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("site %s agent metrics: %w", s.Name, err)
		}
		out[s.Name] = m
	}
	return out, nil
}

// parseVerdicts reads the reason → count of rampart_agent_verdicts_total
// from a Prometheus text exposition.
func parseVerdicts(r io.Reader) (map[string]uint64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	f, ok := fams["rampart_agent_verdicts_total"]
	if !ok {
		return nil, errors.New("no rampart_agent_verdicts_total in the metrics")
	}
	m := map[string]uint64{}
	for _, x := range f.GetMetric() {
		for _, lp := range x.GetLabel() {
			if lp.GetName() == "reason" {
				v := x.GetCounter().GetValue()
				if x.GetCounter() == nil {
					v = x.GetUntyped().GetValue()
				}
				m[lp.GetValue()] = uint64(v)
			}
		}
	}
	return m, nil
}

// probes send SYNs from a probe prefix from the router straight to each site
// and record each site's SYN-ACKs.
type probes struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	sites  map[string]*siteProbe
	errs   []error
}

type siteProbe struct {
	start   time.Time
	sent    uint64   // set when the sender ends
	answers []synAck // first SYN-ACK per probe, in arrival order
	seen    map[uint16]bool
}

// record notes a SYN-ACK to the probe from port at time at; only the
// first per probe counts (later ones are retransmissions of an answer
// given before).
func (sp *siteProbe) record(port uint16, at time.Time) {
	if !sp.seen[port] {
		sp.seen[port] = true
		sp.answers = append(sp.answers, synAck{At: at, Port: port})
	}
}

// synAck is a site's first answer to the probe sent from port Port.
type synAck struct {
	At   time.Time
	Port uint16
}

func (l *Lab) startProbes(ctx context.Context, dst netip.AddrPort, src netip.Prefix, sequential bool) (*probes, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &probes{cancel: cancel, sites: map[string]*siteProbe{}}
	for _, s := range l.Sites {
		addr := s.Addr4
		if dst.Addr().Is6() {
			addr = s.Addr6
		}
		link, err := netip.ParseAddr(addr)
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("site %s link address %q: %w", s.Name, addr, err)
		}
		hop, err := pktgen.NextHop(l.Router.Netns, link)
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("the router's link to site %s: %w", s.Name, err)
		}
		ln, err := pktgen.Listen(l.Router.Netns, hop.Iface)
		if err != nil {
			p.stop()
			return nil, err
		}
		sp := &siteProbe{start: time.Now(), seen: map[uint16]bool{}}
		p.sites[s.Name] = sp
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			defer ln.Close()
			for ctx.Err() == nil {
				f, ok, err := ln.Next(100 * time.Millisecond)
				if err != nil {
					p.fail(fmt.Errorf("capture on the router's link to %s: %w", s.Name, err))
					return
				}
				if !ok {
					continue
				}
				at := time.Now()
				pk, err := pktgen.ParseHeaders(f) // the site's TCP checksum is left to offload on veth
				if err != nil || pk.Src != dst.Addr() || pk.SrcPort != dst.Port() || pk.Flags != 0x12 || !src.Contains(pk.Dst) {
					continue
				}
				p.mu.Lock()
				sp.record(pk.DstPort, at)
				p.mu.Unlock()
			}
		}()
		go func() {
			defer p.wg.Done()
			rep, err := pktgen.Run(ctx, pktgen.Config{NetNS: l.Router.Netns, Iface: hop.Iface, DstMAC: hop.MAC,
				SrcCIDR: src, Sequential: sequential, Dst: dst, Kind: pktgen.SYN, Rate: probeRate, Duration: 10 * time.Minute,
				Seed: uint64(time.Now().UnixNano())})
			p.mu.Lock()
			sp.sent = rep.Sent
			p.mu.Unlock()
			if err != nil {
				p.fail(fmt.Errorf("probes to %s: %w", s.Name, err))
			}
		}()
	}
	return p, nil
}

func (p *probes) fail(err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

func (p *probes) stop() {
	p.cancel()
	p.wg.Wait()
}

// waitAnswered waits until every site answered a probe after since.
func (p *probes) waitAnswered(ctx context.Context, since time.Time, timeout time.Duration) error {
	return waitFor(ctx, timeout, "every site to answer a probe", func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.errs) > 0 {
			return errors.Join(p.errs...)
		}
		var silent []string
		for name, sp := range p.sites {
			if n := len(sp.answers); n == 0 || !sp.answers[n-1].At.After(since) {
				silent = append(silent, name)
			}
		}
		if len(silent) > 0 {
			sort.Strings(silent)
			return fmt.Errorf("no SYN-ACK to a probe from %v", silent)
		}
		return nil
	})
}

// effect is when the deny published at t0 took effect at site: the time
// of the site's last first answer after t0 (0 when none came after t0);
// with how many probes it answered and how many were sent so far (at the
// probe rate since the start: the sender reports only at its end).
func (p *probes) effect(site string, t0 time.Time) (d time.Duration, answered, sent uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.sites[site]
	sent = sp.sent
	if sent == 0 {
		sent = uint64(time.Since(sp.start).Seconds() * probeRate)
	}
	return lastAnswerAfter(sp.answers, t0), uint64(len(sp.answers)), sent
}

// lastAnswerAfter is how long after t0 the last answer came (0 when none
// came after t0).
func lastAnswerAfter(answers []synAck, t0 time.Time) time.Duration {
	var d time.Duration
	for _, a := range answers {
		if a.At.After(t0) {
			d = max(d, a.At.Sub(t0))
		}
	}
	return d
}
