package snapshot

import (
	"fmt"
	"net/netip"
	"slices"
)

// L4 is what the node agent enforces in XDP and steers with sk_lookup.
type L4 struct {
	// VIPs are the service addresses; traffic to any other address is
	// never touched.
	VIPs []VIP `yaml:"vips" json:"vips,omitempty"`
	// Limits per source (IPv4 /32, IPv6 /64), for VIP traffic only.
	Limits L4Limits `yaml:"limits" json:"limits"`
	// Malformed is what happens to a malformed or truncated frame to a
	// VIP: drop (the default) or pass. Malformed non-VIP frames always pass.
	Malformed string `yaml:"malformed" json:"malformed"`
	// DenyCIDRs are dropped in XDP (with the deny channel's CIDRs).
	DenyCIDRs []string `yaml:"deny_cidrs" json:"deny_cidrs,omitempty"`
}

// VIP is one service address and the ports steered to proxy listeners.
type VIP struct {
	Address string    `yaml:"address" json:"address"` // an IPv4 or IPv6 address
	Ports   []VIPPort `yaml:"ports" json:"ports"`
}

// VIPPort steers a port of a VIP to a listener: TCP when the listener
// serves http1 or h2, UDP as well when it serves h3.
type VIPPort struct {
	Port     int    `yaml:"port" json:"port"`
	Listener string `yaml:"listener" json:"listener"`
}

// L4Limits are per-source token buckets and caps enforced in XDP; 0 means
// no limit.
type L4Limits struct {
	PacketsPerSecond        int `yaml:"packets_per_second" json:"packets_per_second"`
	PacketBurst             int `yaml:"packet_burst" json:"packet_burst"`
	SYNPerSecond            int `yaml:"syn_per_second" json:"syn_per_second"`
	SYNBurst                int `yaml:"syn_burst" json:"syn_burst"`
	MaxConnectionsPerSource int `yaml:"max_connections_per_source" json:"max_connections_per_source"`
}

func normalizeL4(l *L4) {
	if l.Malformed == "" {
		l.Malformed = "drop"
	}
	if l.Limits.PacketsPerSecond > 0 && l.Limits.PacketBurst == 0 {
		l.Limits.PacketBurst = l.Limits.PacketsPerSecond
	}
	if l.Limits.SYNPerSecond > 0 && l.Limits.SYNBurst == 0 {
		l.Limits.SYNBurst = l.Limits.SYNPerSecond
	}
}

func validateL4(c *Config, p *problems) {
	l := c.L4
	if l.Malformed != "drop" && l.Malformed != "pass" {
		p.add("l4: malformed %q must be drop or pass", l.Malformed)
	}
	lim := l.Limits
	checkRange(p, "l4.limits", "packets_per_second", lim.PacketsPerSecond, 0, 100_000_000)
	checkRange(p, "l4.limits", "packet_burst", lim.PacketBurst, 0, 1_000_000_000)
	checkRange(p, "l4.limits", "syn_per_second", lim.SYNPerSecond, 0, 100_000_000)
	checkRange(p, "l4.limits", "syn_burst", lim.SYNBurst, 0, 1_000_000_000)
	checkRange(p, "l4.limits", "max_connections_per_source", lim.MaxConnectionsPerSource, 0, 1_000_000)
	listeners := map[string]Listener{}
	for _, ln := range c.Listeners {
		listeners[ln.Name] = ln
	}
	seen := map[netip.AddrPort]bool{}
	for i, v := range l.VIPs {
		where := fmt.Sprintf("l4.vips #%d (%s)", i+1, v.Address)
		a, err := netip.ParseAddr(v.Address)
		if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			p.add("%s: address must be a unicast IPv4 or IPv6 address", where)
			continue
		}
		if len(v.Ports) == 0 {
			p.add("%s: at least one port is required", where)
		}
		for _, vp := range v.Ports {
			if vp.Port < 1 || vp.Port > 65535 {
				p.add("%s: port %d must be between 1 and 65535", where, vp.Port)
				continue
			}
			ap := netip.AddrPortFrom(a.Unmap(), uint16(vp.Port))
			if seen[ap] {
				p.add("%s: port %d is listed twice", where, vp.Port)
			}
			seen[ap] = true
			if _, ok := listeners[vp.Listener]; !ok {
				p.add("%s: port %d names unknown listener %q", where, vp.Port, vp.Listener)
			}
		}
	}
	for _, s := range l.DenyCIDRs {
		if _, err := netip.ParsePrefix(s); err != nil {
			if _, err2 := netip.ParseAddr(s); err2 != nil {
				p.add("l4.deny_cidrs: %q is not a prefix or address", s)
			}
		}
	}
}

// ListenerProtocols says which transport protocols a listener needs
// steered: tcp for http1/h2, udp for h3.
func ListenerProtocols(l Listener) (tcp, udp bool) {
	return slices.Contains(l.Protocols, "http1") || slices.Contains(l.Protocols, "h2"), slices.Contains(l.Protocols, "h3")
}
