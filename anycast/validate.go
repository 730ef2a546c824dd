package anycast

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// ValidationError lists every problem of a config, one per line.
type ValidationError struct{ Problems []string }

func (e *ValidationError) Error() string {
	return fmt.Sprintf("anycast config has %d problem(s):\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func (p *problems) rng(where, key string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add("%s: %s %d must be between %d and %d", where, key, v, lo, hi)
	}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Validate checks a normalised config (call Normalize first) and reports
// every problem in one *ValidationError. Refused in particular: anything that
// would withdraw every VIP of every site at once — no VIPs, min_sites 0 —
// and guards that could never let a site withdraw (min_sites ≥ sites).
func (c *Config) Validate() error {
	var p problems
	if c.LocalAS == 0 || c.LocalAS == 23456 || c.LocalAS == 65535 || c.LocalAS == 4294967295 {
		p.add("local_as %d is not a usable AS number", c.LocalAS)
	}
	if a, err := netip.ParseAddr(c.RouterID); err != nil || !a.Is4() || a.IsUnspecified() {
		p.add("router_id %q must be a non-zero IPv4 address", c.RouterID)
	}
	if c.SiteID == 0 {
		p.add("site_id must be at least 1")
	}
	if c.NextHopV4 != "" && !isAddr(c.NextHopV4, true) {
		p.add("next_hop_v4 %q must be an IPv4 address", c.NextHopV4)
	}
	if c.NextHopV6 != "" && !isAddr(c.NextHopV6, false) {
		p.add("next_hop_v6 %q must be an IPv6 address", c.NextHopV6)
	}
	p.rng("config", "sample_interval_ms", c.SampleIntervalMs, 50, 60000)
	p.rng("drain", "time_ms", c.Drain.TimeMs, 1000, 3600000)
	if c.Drain.TimeMs < 3*c.SampleIntervalMs {
		p.add("drain: time_ms %d must be at least 3 × sample_interval_ms (%d): the guard relies on a drain outlasting how late other sites see it", c.Drain.TimeMs, c.SampleIntervalMs)
	}
	if c.Drain.Prepend != nil {
		p.rng("drain", "prepend", *c.Drain.Prepend, 0, 16)
	}
	p.rng("damping", "hold_down_ms", c.Damping.HoldDownMs, 1, 3600000)
	p.rng("damping", "max_hold_down_ms", c.Damping.MaxHoldDownMs, c.Damping.HoldDownMs, 86400000)
	p.rng("damping", "flap_window_ms", c.Damping.FlapWindowMs, 1000, 86400000)
	c.validateGuard(&p)
	switch c.DryRun {
	case DryRunOff, DryRunNoAnnounce, DryRunNoBGP:
	default:
		p.add("dry_run %q must be off, no_announce or no_bgp", c.DryRun)
	}
	if len(c.ShutdownMessage) > 128 {
		p.add("shutdown_message is %d bytes, more than 128", len(c.ShutdownMessage))
	}
	v4peers := c.validatePeers(&p)
	inputs := c.validateInputs(&p)
	c.validateVIPs(&p, inputs, v4peers)
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

func (c *Config) validateGuard(p *problems) {
	g := c.Guard
	if g.MinSites == nil || *g.MinSites < 1 {
		p.add("guard: min_sites must be at least 1 (0 would let every site withdraw at once)")
	} else if *g.MinSites > 1000 {
		p.add("guard: min_sites %d is more than 1000", *g.MinSites)
	} else if g.Sites != 0 && *g.MinSites >= g.Sites {
		p.add("guard: min_sites %d must be below sites %d, else no site could ever withdraw", *g.MinSites, g.Sites)
	}
	if g.Sites < 0 {
		p.add("guard: sites %d must not be negative", g.Sites)
	}
	if g.CommunityASN == 0 {
		p.add("guard: community_asn is required (the fleet-wide global administrator of the site community)")
	}
}

func (c *Config) validatePeers(p *problems) (anyV4 bool) {
	if len(c.Peers) == 0 && c.DryRun != DryRunNoBGP {
		p.add("peers: at least one peer is required")
	}
	seen := map[netip.Addr]bool{}
	for i, pe := range c.Peers {
		where := fmt.Sprintf("peer #%d (%s)", i+1, pe.Address)
		a, err := netip.ParseAddr(pe.Address)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			p.add("%s: address must be an IP address", where)
		} else {
			a = a.Unmap()
			if seen[a] {
				p.add("%s: listed twice", where)
			}
			seen[a] = true
			anyV4 = anyV4 || a.Is4()
			if pe.LocalAddress != "" && !isAddr(pe.LocalAddress, a.Is4()) {
				p.add("%s: local_address %q must be an address of the same family", where, pe.LocalAddress)
			}
		}
		if pe.AS == 0 || pe.AS == 23456 {
			p.add("%s: as %d is not a usable AS number", where, pe.AS)
		}
		p.rng(where, "port", pe.Port, 1, 65535)
		p.rng(where, "hold_time_s", pe.HoldTimeS, 3, 65535)
		p.rng(where, "keepalive_s", pe.KeepaliveS, 1, max(1, pe.HoldTimeS/3))
		p.rng(where, "connect_retry_s", pe.ConnectRetryS, 1, 3600)
		p.rng(where, "multihop_ttl", pe.MultihopTTL, 0, 255)
		if len(pe.Password) > 80 {
			p.add("%s: password is longer than 80 bytes (TCP MD5 limit)", where)
		}
		fams := map[string]bool{}
		for _, f := range pe.Families {
			if f != "ipv4" && f != "ipv6" || fams[f] {
				p.add("%s: families must list ipv4 and/or ipv6 once each, not %q", where, f)
			}
			fams[f] = true
		}
	}
	return anyV4
}

func (c *Config) validateInputs(p *problems) map[string]Input {
	byName := map[string]Input{}
	for i, in := range c.Inputs {
		where := fmt.Sprintf("input #%d (%s)", i+1, in.Name)
		if !nameRE.MatchString(in.Name) {
			p.add("%s: name must be 1-64 of A-Z a-z 0-9 _ . : -", where)
		} else if _, dup := byName[in.Name]; dup {
			p.add("%s: duplicate name", where)
		}
		byName[in.Name] = in
		p.rng(where, "rise", in.Rise, 1, 100)
		p.rng(where, "fall", in.Fall, 1, 100)
		only := func(key string, set bool, kind string) {
			if set && in.Kind != kind {
				p.add("%s: %s is only for kind %s", where, key, kind)
			}
		}
		only("min_share", in.MinShare != 0, KindShare)
		only("max_age_ms", in.MaxAgeMs != 0, KindAge)
		only("url", in.URL != "", KindHTTP)
		only("host", in.Host != "", KindHTTP)
		only("timeout_ms", in.TimeoutMs != 0, KindHTTP)
		only("expect_status", len(in.ExpectStatus) != 0, KindHTTP)
		switch in.Kind {
		case KindBool:
		case KindShare:
			if !(in.MinShare > 0 && in.MinShare <= 1) {
				p.add("%s: min_share %v must be in (0, 1]", where, in.MinShare)
			}
		case KindAge:
			p.rng(where, "max_age_ms", in.MaxAgeMs, 1000, 30*86400000)
		case KindHTTP:
			u, err := url.Parse(in.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.add("%s: url %q must be http(s)://host[:port]/path", where, in.URL)
			}
			p.rng(where, "timeout_ms", in.TimeoutMs, 10, c.SampleIntervalMs)
			for _, s := range in.ExpectStatus {
				p.rng(where, "expect_status", s, 100, 599)
			}
		default:
			p.add("%s: kind %q must be bool, share, age or http", where, in.Kind)
		}
	}
	return byName
}

func (c *Config) validateVIPs(p *problems, inputs map[string]Input, v4peers bool) {
	if len(c.VIPs) == 0 {
		p.add("vips: at least one VIP is required (a config without VIPs would withdraw them all)")
	}
	anyGlobal := false
	for _, in := range inputs {
		anyGlobal = anyGlobal || in.Global
	}
	seen := map[netip.Prefix]bool{}
	for i, v := range c.VIPs {
		where := fmt.Sprintf("vip #%d (%s)", i+1, v.Prefix)
		pf, err := netip.ParsePrefix(v.Prefix)
		if err != nil || pf.Addr().Zone() != "" || pf != pf.Masked() || pf.Addr().Is4In6() {
			p.add("%s: prefix must be a masked IPv4 or IPv6 prefix such as 192.0.2.10/32", where)
			continue
		}
		if seen[pf] {
			p.add("%s: listed twice", where)
		}
		seen[pf] = true
		v4 := pf.Addr().Is4()
		if v4 && pf.Bits() < 8 || !v4 && pf.Bits() < 16 {
			p.add("%s: prefix is shorter than /8 (IPv4) or /16 (IPv6)", where)
		}
		if v.NextHop != "" && !isAddr(v.NextHop, v4) {
			p.add("%s: next_hop %q must be an address of the prefix's family", where, v.NextHop)
		}
		if !v4 && v.NextHop == "" && c.NextHopV6 == "" && v4peers {
			p.add("%s: an IPv6 VIP over an IPv4 session needs next_hop (or next_hop_v6)", where)
		}
		for _, s := range v.Communities {
			if a, b, err := parseCommunity(s); err != nil {
				p.add("%s: community %q: %v", where, s, err)
			} else if a == 65535 && b == 0 {
				p.add("%s: community 65535:0 (graceful shutdown) is added by the drain, not configured", where)
			}
		}
		for _, s := range v.LargeCommunities {
			if lc, err := parseLargeCommunity(s); err != nil {
				p.add("%s: large community %q: %v", where, s, err)
			} else if lc[0] == c.Guard.CommunityASN {
				p.add("%s: large community %q uses guard.community_asn, which is reserved for the site community", where, s)
			}
		}
		if len(v.Inputs) == 0 && !anyGlobal {
			p.add("%s: no inputs and no global input: it would be announced regardless of health", where)
		}
		names := map[string]bool{}
		for _, n := range v.Inputs {
			in, ok := inputs[n]
			switch {
			case !ok:
				p.add("%s: unknown input %q", where, n)
			case in.Global:
				p.add("%s: input %q is global; it applies to every VIP already", where, n)
			case names[n]:
				p.add("%s: input %q listed twice", where, n)
			}
			names[n] = true
		}
	}
}

func isAddr(s string, v4 bool) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == "" && !a.IsUnspecified() && a.Is4() == v4 && !a.Is4In6()
}

func parseCommunity(s string) (uint16, uint16, error) {
	a, b, ok := strings.Cut(s, ":")
	x, err1 := strconv.ParseUint(a, 10, 16)
	y, err2 := strconv.ParseUint(b, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("want ASN:VALUE, each 0..65535")
	}
	return uint16(x), uint16(y), nil
}

func parseLargeCommunity(s string) ([3]uint32, error) {
	var out [3]uint32
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return out, fmt.Errorf("want GLOBAL:LOCAL1:LOCAL2, each 0..4294967295")
	}
	for i, part := range parts {
		v, err := strconv.ParseUint(part, 10, 32)
		if err != nil {
			return out, fmt.Errorf("want GLOBAL:LOCAL1:LOCAL2, each 0..4294967295")
		}
		out[i] = uint32(v)
	}
	return out, nil
}
