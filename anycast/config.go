// Package anycast announces the node's service VIPs over BGP while the node
// is healthy and withdraws them, after a drain, when it is not; a fail-static
// guard keeps a VIP announced when withdrawing it would leave fewer than
// min_sites sites announcing it. GoBGP is embedded as a library.
package anycast

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"gopkg.in/yaml.v3"
)

// Config is the anycast section of the node agent's config. Durations are
// milliseconds (_ms) except BGP timers, which are whole seconds on the wire
// (_s). ParseYAML fills defaults and validates.
type Config struct {
	LocalAS  uint32 `yaml:"local_as" json:"local_as"`
	RouterID string `yaml:"router_id" json:"router_id"` // an IPv4 address, unique per speaker
	SiteID   uint32 `yaml:"site_id" json:"site_id"`     // this site's number in the fleet, ≥ 1
	// NextHopV4 is the IPv4 next hop of IPv4 VIPs; empty: the session's
	// local address (next-hop-self).
	NextHopV4 string `yaml:"next_hop_v4" json:"next_hop_v4,omitempty"`
	// NextHopV6 is the IPv6 next hop of IPv6 VIPs, required with an IPv6
	// VIP unless every peer is reached over IPv6.
	NextHopV6 string  `yaml:"next_hop_v6" json:"next_hop_v6,omitempty"`
	Peers     []Peer  `yaml:"peers" json:"peers"`
	VIPs      []VIP   `yaml:"vips" json:"vips"`
	Inputs    []Input `yaml:"inputs" json:"inputs"`
	// SampleIntervalMs is how often every input is sampled and every VIP
	// decided; rise and fall count samples.
	SampleIntervalMs int     `yaml:"sample_interval_ms" json:"sample_interval_ms"`
	Drain            Drain   `yaml:"drain" json:"drain"`
	Damping          Damping `yaml:"damping" json:"damping"`
	Guard            Guard   `yaml:"guard" json:"guard"`
	// DryRun: off (default); no_announce: sessions come up and routes are
	// learned, but no path is ever sent; no_bgp: no BGP at all. Either way
	// every decision is made, logged and shown in the status.
	DryRun string `yaml:"dry_run" json:"dry_run"`
	// ShutdownMessage is the RFC 8203 communication sent with the
	// Cease/Administrative Shutdown on Stop (at most 128 bytes).
	ShutdownMessage string `yaml:"shutdown_message" json:"shutdown_message"`
}

// Peer is one BGP neighbour. The speaker dials out; it never listens.
type Peer struct {
	Address      string `yaml:"address" json:"address"`
	AS           uint32 `yaml:"as" json:"as"`
	Port         int    `yaml:"port" json:"port"`                   // default 179
	LocalAddress string `yaml:"local_address" json:"local_address"` // source address of the session; empty: the kernel's choice
	HoldTimeS    int    `yaml:"hold_time_s" json:"hold_time_s"`     // 3..65535, default 9
	KeepaliveS   int    `yaml:"keepalive_s" json:"keepalive_s"`     // default hold/3
	// ConnectRetryS is the wait between connection attempts (GoBGP's own
	// default is 120 s; ours is 5).
	ConnectRetryS int      `yaml:"connect_retry_s" json:"connect_retry_s"`
	Password      string   `yaml:"password" json:"-"`                  // TCP MD5 (RFC 2385); empty: none
	MultihopTTL   int      `yaml:"multihop_ttl" json:"multihop_ttl"`   // eBGP multihop TTL; 0: directly connected
	Families      []string `yaml:"families" json:"families,omitempty"` // ipv4, ipv6; default both
}

// VIP is one announced prefix: a /32 or /128 service address, or a larger
// prefix that covers several.
type VIP struct {
	Prefix string `yaml:"prefix" json:"prefix"`
	// Inputs names the inputs this VIP needs up, besides the global ones.
	Inputs           []string `yaml:"inputs" json:"inputs,omitempty"`
	Communities      []string `yaml:"communities" json:"communities,omitempty"`             // "65000:100"
	LargeCommunities []string `yaml:"large_communities" json:"large_communities,omitempty"` // "65000:1:2"
	MED              *uint32  `yaml:"med" json:"med,omitempty"`
	NextHop          string   `yaml:"next_hop" json:"next_hop,omitempty"` // overrides next_hop_v4/v6
}

// Input is one health signal with hysteresis: it turns up after Rise
// consecutive good samples and down after Fall consecutive bad ones.
type Input struct {
	Name string `yaml:"name" json:"name"`
	// Kind: bool (default; set by SetUp or SetFunc), share (SetShare:
	// healthy/total ≥ min_share), age (SetTime: now − t ≤ max_age_ms) or
	// http (a GET of url by the announcer itself, e.g. through the VIP).
	Kind   string `yaml:"kind" json:"kind"`
	Global bool   `yaml:"global" json:"global"` // needed by every VIP
	Rise   int    `yaml:"rise" json:"rise"`     // default 3
	Fall   int    `yaml:"fall" json:"fall"`     // default 2

	MinShare     float64 `yaml:"min_share" json:"min_share,omitempty"`   // share: (0, 1], default 0.5
	MaxAgeMs     int     `yaml:"max_age_ms" json:"max_age_ms,omitempty"` // age: required
	URL          string  `yaml:"url" json:"url,omitempty"`               // http: http://host[:port]/path
	Host         string  `yaml:"host" json:"host,omitempty"`             // http: Host header
	TimeoutMs    int     `yaml:"timeout_ms" json:"timeout_ms,omitempty"` // http: default 1000, at most the sample interval
	ExpectStatus []int   `yaml:"expect_status" json:"expect_status,omitempty"`
}

// Drain is what happens before a withdrawal: the path is re-announced with
// the GRACEFUL_SHUTDOWN community (65535:0) and the local AS prepended
// Prepend more times, for TimeMs, so traffic moves before the route goes.
type Drain struct {
	TimeMs  int  `yaml:"time_ms" json:"time_ms"` // default 30000; 1000..3600000
	Prepend *int `yaml:"prepend" json:"prepend"` // default 3; 0..16
}

// Damping bounds flapping: after a VIP went down it is re-announced no
// sooner than HoldDownMs × 2^(n−1) after that, n being the number of times it
// went down within FlapWindowMs, at most MaxHoldDownMs. Withdrawals are
// never delayed by damping.
type Damping struct {
	HoldDownMs    int `yaml:"hold_down_ms" json:"hold_down_ms"`         // default 5000
	MaxHoldDownMs int `yaml:"max_hold_down_ms" json:"max_hold_down_ms"` // default 300000
	FlapWindowMs  int `yaml:"flap_window_ms" json:"flap_window_ms"`     // default 600000
}

// Guard is the fail-static rule: a VIP is withdrawn only while at least
// MinSites other sites announce it (see README: how sites are counted).
type Guard struct {
	// MinSites ≥ 1; absent means 1. 0 is refused: it would let every site
	// withdraw at once.
	MinSites *int `yaml:"min_sites" json:"min_sites"`
	// Sites is the number of sites announcing the VIPs, when known;
	// min_sites must then be below it, else no site could ever withdraw.
	Sites int `yaml:"sites" json:"sites,omitempty"`
	// CommunityASN is the global administrator of the large community
	// COMMUNITY_ASN:STATE:SITE_ID every path carries (STATE 1 up,
	// 2 draining, 3 held); the same in the whole fleet.
	CommunityASN uint32 `yaml:"community_asn" json:"community_asn"`
	// LearnFromBGP: count sites from the paths peers send back (default
	// true). Without it only the fleet view counts.
	LearnFromBGP *bool `yaml:"learn_from_bgp" json:"learn_from_bgp"`
}

// MaxConfigBytes bounds a YAML config given to ParseYAML.
const MaxConfigBytes = 4 << 20

// ParseYAML decodes a config strictly (unknown or duplicate keys, a second
// document are errors), fills defaults and validates it.
func ParseYAML(data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("anycast config is %d bytes, more than %d", len(data), MaxConfigBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("anycast config is empty")
		}
		return nil, fmt.Errorf("parse anycast config: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse anycast config: more than one YAML document")
	}
	c.Normalize()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Normalize fills defaults in place. It never hides a problem Validate
// reports (an explicit min_sites: 0 stays 0).
func (c *Config) Normalize() {
	def(&c.SampleIntervalMs, 1000)
	def(&c.Drain.TimeMs, 30000)
	if c.Drain.Prepend == nil {
		three := 3
		c.Drain.Prepend = &three
	}
	def(&c.Damping.HoldDownMs, 5000)
	def(&c.Damping.MaxHoldDownMs, 300000)
	def(&c.Damping.FlapWindowMs, 600000)
	if c.Guard.MinSites == nil {
		one := 1
		c.Guard.MinSites = &one
	}
	if c.Guard.LearnFromBGP == nil {
		t := true
		c.Guard.LearnFromBGP = &t
	}
	if c.DryRun == "" {
		c.DryRun = DryRunOff
	}
	if c.ShutdownMessage == "" {
		c.ShutdownMessage = "rampart anycast: planned stop"
	}
	for i := range c.Peers {
		p := &c.Peers[i]
		def(&p.Port, 179)
		def(&p.HoldTimeS, 9)
		if p.KeepaliveS == 0 {
			p.KeepaliveS = max(1, p.HoldTimeS/3)
		}
		def(&p.ConnectRetryS, 5)
		if len(p.Families) == 0 {
			p.Families = []string{"ipv4", "ipv6"}
		}
	}
	for i := range c.Inputs {
		in := &c.Inputs[i]
		if in.Kind == "" {
			in.Kind = KindBool
		}
		def(&in.Rise, 3)
		def(&in.Fall, 2)
		if in.Kind == KindShare && in.MinShare == 0 {
			in.MinShare = 0.5
		}
		if in.Kind == KindHTTP {
			def(&in.TimeoutMs, min(1000, c.SampleIntervalMs))
			if len(in.ExpectStatus) == 0 {
				for s := 200; s < 300; s++ {
					in.ExpectStatus = append(in.ExpectStatus, s)
				}
			}
		}
	}
}

func def(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

// Dry-run modes.
const (
	DryRunOff        = "off"
	DryRunNoAnnounce = "no_announce"
	DryRunNoBGP      = "no_bgp"
)

// Input kinds.
const (
	KindBool  = "bool"
	KindShare = "share"
	KindAge   = "age"
	KindHTTP  = "http"
)

// clone returns a deep copy, so that a caller's later changes to its
// slices cannot reach the announcer.
func (c Config) clone() Config {
	n := c
	n.Peers = slices.Clone(c.Peers)
	for i := range n.Peers {
		n.Peers[i].Families = slices.Clone(c.Peers[i].Families)
	}
	n.VIPs = slices.Clone(c.VIPs)
	for i, v := range c.VIPs {
		n.VIPs[i].Inputs = slices.Clone(v.Inputs)
		n.VIPs[i].Communities = slices.Clone(v.Communities)
		n.VIPs[i].LargeCommunities = slices.Clone(v.LargeCommunities)
		n.VIPs[i].MED = clonePtr(v.MED)
	}
	n.Inputs = slices.Clone(c.Inputs)
	for i := range n.Inputs {
		n.Inputs[i].ExpectStatus = slices.Clone(c.Inputs[i].ExpectStatus)
	}
	n.Drain.Prepend = clonePtr(c.Drain.Prepend)
	n.Guard.MinSites = clonePtr(c.Guard.MinSites)
	n.Guard.LearnFromBGP = clonePtr(c.Guard.LearnFromBGP)
	return n
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
