package anycast

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Reconfigure applies a new config without touching the BGP sessions:
// VIPs, inputs, their attributes, drain, damping, guard.min_sites and
// guard.sites, next hops and the shutdown message may change. A VIP kept
// keeps its state (a changed attribute is re-announced at once); a new VIP
// is announced once its inputs are up; a VIP removed drains and is
// withdrawn. Changing anything else (AS, router id, site id, peers, sample
// interval, dry run, the guard's community or learning) needs a new
// Announcer, and is refused naming the keys.
func (a *Announcer) Reconfigure(cfg Config) error {
	cfg = cfg.clone()
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := a.fixed.sameSpeaker(&cfg); err != nil {
		return err
	}
	a.mu.Lock()
	a.cfg = cfg
	a.eng.reconfigure(&a.cfg, time.Now())
	for _, v := range a.eng.vips {
		a.m.guardActive.WithLabelValues(v.cfg.Prefix).Set(b2f(v.state == StateHeld))
		a.m.vipState.WithLabelValues(v.cfg.Prefix, string(v.state)).Set(1)
	}
	for _, in := range a.eng.inputs {
		a.m.inputUp.WithLabelValues(in.cfg.Name).Set(b2f(in.state))
	}
	if a.started {
		a.syncProbes()
	}
	a.mu.Unlock()
	a.log.Info("anycast: reconfigured", "vips", len(cfg.VIPs), "inputs", len(cfg.Inputs))
	a.poke()
	return nil
}

// sameSpeaker says which keys differ that only a new Announcer can change.
func (c *Config) sameSpeaker(n *Config) error {
	var diff []string
	check := func(key string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			diff = append(diff, key)
		}
	}
	check("local_as", c.LocalAS, n.LocalAS)
	check("router_id", c.RouterID, n.RouterID)
	check("site_id", c.SiteID, n.SiteID)
	check("peers", c.Peers, n.Peers)
	check("sample_interval_ms", c.SampleIntervalMs, n.SampleIntervalMs)
	check("dry_run", c.DryRun, n.DryRun)
	check("guard.community_asn", c.Guard.CommunityASN, n.Guard.CommunityASN)
	check("guard.learn_from_bgp", *c.Guard.LearnFromBGP, *n.Guard.LearnFromBGP)
	if len(diff) > 0 {
		return errors.New(fmt.Sprint("anycast: changing ", strings.Join(diff, ", "), " needs a restart of the announcer"))
	}
	return nil
}
