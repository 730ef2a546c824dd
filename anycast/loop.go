package anycast

import (
	"context"
	"log/slog"
	"net/netip"
	"time"
)

// wire is a path as put on the wire: nil Attributes for none.
type wire struct {
	r   route
	a   *Attributes
	key string
}

// desired is the path v's state wants, with the current config. Callers hold mu.
func (a *Announcer) desired(v *vip) wire {
	r := v.state.route()
	if r == routeNone {
		return wire{}
	}
	at := a.cfg.attrsFor(v, r)
	return wire{r: r, a: &at, key: at.key()}
}

func (a *Announcer) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *Announcer) loop() {
	defer close(a.done)
	t := time.NewTicker(ms(a.fixed.SampleIntervalMs))
	defer t.Stop()
	for {
		select {
		case <-a.quit:
			return
		case <-t.C:
			a.tick(time.Now(), true)
		case <-a.wake:
			a.tick(time.Now(), false)
		}
	}
}

// sites is the control plane's view of prefix while it is fresh, else
// what BGP peers sent back merged with the fleet view. leaving, when not
// zero, is when this site began to drain prefix (the guard decides its
// withdrawal): the control plane's view then counts as fresh only with
// reports made since (ControlView). Callers hold mu.
func (a *Announcer) sites(prefix netip.Prefix, leaving time.Time) []SiteRoute {
	out, src := a.sitesFrom(prefix, leaving)
	a.guardSource = src
	return out
}

// guardSites is sites for the engine's decisions: leaving since the
// drain's start while prefix's VIP drains. Callers hold mu.
func (a *Announcer) guardSites(prefix netip.Prefix) []SiteRoute {
	return a.sites(prefix, a.eng.drainStart(prefix))
}

func (a *Announcer) sitesFrom(prefix netip.Prefix, leaving time.Time) ([]SiteRoute, string) {
	var stale string
	if a.control != nil {
		cs, fresh, src := a.control(prefix, leaving)
		if fresh {
			return controlSites(cs), "control plane (" + src + ")"
		}
		stale = "; control plane view not fresh (" + src + ")"
	}
	var learned, fleet []SiteRoute
	if a.sp != nil && *a.fixed.Guard.LearnFromBGP {
		learned = a.sp.sites(prefix)
	}
	if a.fleet != nil {
		for _, r := range a.fleet(prefix) {
			r.From = "fleet"
			fleet = append(fleet, r)
		}
	}
	src := "bgp paths"
	if !*a.fixed.Guard.LearnFromBGP {
		src = "none"
	}
	if a.fleet != nil {
		src += " and fleet view"
	}
	return mergeSites(a.fixed.SiteID, learned, fleet), src + stale
}

// tick samples (when asked), decides, and brings the wire in line.
func (a *Announcer) tick(now time.Time, sample bool) {
	polled := a.poll()
	a.mu.Lock()
	for in, r := range polled {
		in.set, in.up, in.detail = true, r.up, r.detail
	}
	if sample {
		for _, in := range a.eng.sample(now) {
			a.log.Info("anycast: input changed", "input", in.cfg.Name, "up", in.state, "detail", in.lastDetail,
				"good", in.good, "bad", in.bad)
			a.m.inputUp.WithLabelValues(in.cfg.Name).Set(b2f(in.state))
		}
	}
	a.markDrains()
	trans := a.eng.decide(now, a.guardSites)
	type change struct {
		v          *vip
		want, have wire
	}
	var todo []change
	for _, v := range a.eng.all() {
		if want, have := a.desired(v), a.applied[v]; have.key != want.key || have.r != want.r {
			todo = append(todo, change{v, want, have})
		}
	}
	a.mu.Unlock()

	for _, t := range trans {
		a.logTransition(t)
	}
	for _, c := range todo {
		err := a.putOnWire(c.v, c.want, c.have)
		a.mu.Lock()
		if err != nil {
			a.wireErr[c.v] = err.Error()
		} else {
			a.applied[c.v] = c.want
			delete(a.wireErr, c.v)
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	for _, v := range a.eng.prune() {
		delete(a.applied, v)
		delete(a.wireErr, v)
		a.m.forget(v.cfg.Prefix)
		a.log.Info("anycast: vip removed from the config and withdrawn", "vip", v.cfg.Prefix)
	}
	a.mu.Unlock()
	a.updateGauges()
}

func (a *Announcer) putOnWire(v *vip, want, have wire) error {
	if a.fixed.DryRun != DryRunOff {
		a.log.Info("anycast: dry run, not sent", "vip", v.cfg.Prefix, "would", routeName(want.r))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if want.a != nil {
		err = a.sp.set(ctx, v.prefix, want.a, false)
	} else if have.a != nil {
		err = a.sp.set(ctx, v.prefix, have.a, true)
	}
	if err != nil {
		a.m.bgpErrors.Inc()
		a.log.Error("anycast: bgp refused a path change; retrying at the next sample", "vip", v.cfg.Prefix, "err", err)
		return err
	}
	return nil
}

func routeName(r route) string {
	return [...]string{"withdraw", "announce", "announce draining", "announce held"}[r]
}

func (a *Announcer) logTransition(t transition) {
	p := t.vip.cfg.Prefix
	dry := a.fixed.DryRun != DryRunOff
	if t.note {
		a.log.Info("anycast: vip "+string(t.to)+", held down by damping", "vip", p, "hold_down_left",
			t.holdLeft.Round(time.Millisecond).String(), "why", t.why, "dry_run", dry)
		return
	}
	a.m.transitions.WithLabelValues(p, transitionLabel(t.to)).Inc()
	a.m.vipState.WithLabelValues(p, string(t.from)).Set(0)
	a.m.vipState.WithLabelValues(p, string(t.to)).Set(1)
	a.m.guardActive.WithLabelValues(p).Set(b2f(t.to == StateHeld))
	level := slog.LevelInfo
	if t.to == StateHeld {
		a.m.guardTotal.WithLabelValues(p).Inc()
		level = slog.LevelWarn
	}
	attrs := []any{"vip", p, "from", string(t.from), "why", t.why, "dry_run", dry}
	if t.holdLeft > 0 {
		attrs = append(attrs, "hold_down_left", t.holdLeft.Round(time.Millisecond).String())
	}
	a.log.Log(context.Background(), level, "anycast: vip "+string(t.to), attrs...)
}

func (a *Announcer) updateGauges() {
	a.mu.Lock()
	a.m.drained.Reset()
	for _, v := range a.eng.all() {
		for _, d := range a.drainsOf(v) {
			a.m.drained.WithLabelValues(v.cfg.Prefix, d.Source).Set(1)
		}
	}
	n := 0
	for _, w := range a.applied {
		if w.r != routeNone { // in a dry run: what would be on the wire
			n++
		}
	}
	a.mu.Unlock()
	if a.m.wouldSend != nil { // a dry run: nothing is on the wire
		a.m.wouldSend.Set(float64(n))
		n = 0
	}
	a.m.announced.Set(float64(n))
	if a.sp == nil {
		return
	}
	up := 0
	for _, s := range a.sp.sessions(context.Background()) {
		est := s.State == "established"
		if est {
			up++
		}
		a.m.sessionUp.WithLabelValues(s.Peer).Set(b2f(est))
	}
	a.m.sessionsUp.Set(float64(up))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
