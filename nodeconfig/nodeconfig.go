// Package nodeconfig reads a node's first-boot file, /etc/rampart/node.yaml:
// the node's identity, region and zone, its XDP interfaces, the control
// plane it follows, its BGP peers and VIPs. Parse decodes it strictly and
// validates it; Render turns it into the agent's and the proxy's environment
// files (RAMPART_ARGS=...) and the agent's anycast config, which
// `rampart firstboot` writes before the units start.
package nodeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/format/envelope"
)

// MaxBytes bounds a node file.
const MaxBytes = 1 << 20

// Config is node.yaml.
type Config struct {
	Node       Node     `yaml:"node"`
	Interfaces []string `yaml:"interfaces"`
	// XDPMode is the agent's -xdp-mode: auto (default), driver or generic.
	XDPMode string   `yaml:"xdp_mode"`
	Control *Control `yaml:"control"`
	// SnapshotPublicKey is the PEM public key that signs snapshots and deny
	// lists; firstboot writes it to snapshot.pub. Empty: the file is
	// provisioned some other way.
	SnapshotPublicKey string `yaml:"snapshot_public_key"`
	BGP               *BGP   `yaml:"bgp"`
	// VIPs are the prefixes announced over BGP (the anycast config's vips):
	// /32 or /128 service addresses, or shorter prefixes covering several.
	VIPs []string `yaml:"vips"`
	// AgentArgs and ProxyArgs are appended to the rendered arguments (after
	// the defaults, so a repeated flag overrides them): tuning such as
	// -new-sources 50000 or -drain-timeout 60s. One argument per item.
	AgentArgs []string `yaml:"agent_args"`
	ProxyArgs []string `yaml:"proxy_args"`
}

// Node is the node's identity at the control plane and in the fleet.
type Node struct {
	ID     string `yaml:"id"`
	Region string `yaml:"region"`
	Zone   string `yaml:"zone"`
	Cohort string `yaml:"cohort"`
}

// Control is the control plane the proxy follows.
type Control struct {
	URL string `yaml:"url"`
	// Token is the node's bearer token (rampart control nodes enroll);
	// firstboot writes it to node.token. Exactly one of Token and TokenFile.
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	CAFile    string `yaml:"ca_file"`
	CertFile  string `yaml:"cert_file"`
	KeyFile   string `yaml:"key_file"`
}

// BGP is the anycast speaker: the agent announces VIPs to these peers.
type BGP struct {
	LocalAS   uint32 `yaml:"local_as"`
	RouterID  string `yaml:"router_id"`
	SiteID    uint32 `yaml:"site_id"`
	NextHopV4 string `yaml:"next_hop_v4"`
	NextHopV6 string `yaml:"next_hop_v6"`
	// CommunityASN is the fleet-wide global administrator of the site
	// community (the guard's community_asn); required.
	CommunityASN uint32 `yaml:"community_asn"`
	// MinSites is the fail-static guard's min_sites (default 1); Sites the
	// number of sites announcing the VIPs, when known.
	MinSites *int   `yaml:"min_sites"`
	Sites    int    `yaml:"sites"`
	Peers    []Peer `yaml:"peers"`
}

// Peer is one BGP neighbour.
type Peer struct {
	Address      string   `yaml:"address"`
	AS           uint32   `yaml:"as"`
	Port         int      `yaml:"port"`
	LocalAddress string   `yaml:"local_address"`
	Password     string   `yaml:"password"`
	MultihopTTL  int      `yaml:"multihop_ttl"`
	HoldTimeS    int      `yaml:"hold_time_s"`
	Families     []string `yaml:"families"`
}

// Parse decodes a node file strictly (unknown or duplicate keys, a second
// document, trailing data are errors) and validates it. Every problem is
// reported, one per line, each naming the key and the value.
func Parse(data []byte) (*Config, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("node config is %d bytes, more than %d", len(data), MaxBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("node config is empty")
		}
		return nil, fmt.Errorf("parse node config: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse node config: more than one YAML document")
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// names are ids, regions, zones and cohorts: they end up in flags and the
// control plane's records, so no spaces, quotes or shell characters.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ifaceRe is a Linux interface name (IFNAMSIZ − 1 bytes, no '/', ':' or space).
var ifaceRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,14}$`)

// Validate reports every problem of c, one per line.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	name := func(key, v string, required bool) {
		switch {
		case v == "" && required:
			bad("%s: required", key)
		case v != "" && !nameRe.MatchString(v):
			bad("%s %q: want 1-63 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit", key, v)
		}
	}
	name("node.id", c.Node.ID, true)
	name("node.region", c.Node.Region, true)
	name("node.zone", c.Node.Zone, false)
	name("node.cohort", c.Node.Cohort, false)

	if len(c.Interfaces) == 0 {
		bad("interfaces: at least one XDP interface required (e.g. [eth0])")
	}
	seen := map[string]bool{}
	for i, s := range c.Interfaces {
		switch {
		case !ifaceRe.MatchString(s):
			bad("interfaces[%d] %q: not an interface name (1-15 characters of A-Z a-z 0-9 . _ -)", i, s)
		case seen[s]:
			bad("interfaces[%d] %q: listed twice", i, s)
		}
		seen[s] = true
	}
	switch c.XDPMode {
	case "", "auto", "driver", "generic":
	default:
		bad("xdp_mode %q: want auto, driver or generic", c.XDPMode)
	}
	for _, l := range []struct {
		key  string
		args []string
	}{{"agent_args", c.AgentArgs}, {"proxy_args", c.ProxyArgs}} {
		if len(l.args) > 64 {
			bad("%s: %d arguments, at most 64", l.key, len(l.args))
		}
		for i, a := range l.args {
			if !plainArg(a) {
				bad("%s[%d] %q: want one non-empty argument without spaces, quotes, backslashes or $", l.key, i, a)
			}
		}
		if len(l.args) > 0 && !strings.HasPrefix(l.args[0], "-") {
			bad("%s[0] %q: want a flag first (e.g. -drain-timeout)", l.key, l.args[0])
		}
	}
	if c.Control != nil {
		c.Control.validate(bad)
	}
	if c.SnapshotPublicKey != "" {
		if _, err := envelope.ParsePublicKey([]byte(c.SnapshotPublicKey)); err != nil {
			bad("snapshot_public_key: %w", err)
		}
	}
	if len(c.VIPs) > 0 && c.BGP == nil {
		bad("vips %v: announced over BGP, so a bgp section is required", c.VIPs)
	}
	if c.BGP != nil {
		// The anycast package owns the BGP rules: render its config and let
		// it judge, so node.yaml accepts exactly what the agent will.
		if err := c.checkAnycast(); err != nil {
			bad("bgp/vips: %w", err)
		}
	}
	return errors.Join(errs...)
}

func (k *Control) validate(bad func(string, ...any)) {
	u, err := url.Parse(k.URL)
	switch {
	case k.URL == "":
		bad("control.url: required in a control section")
	case err != nil:
		bad("control.url %q: %w", k.URL, err)
	case u.Scheme != "https" && u.Scheme != "http":
		bad("control.url %q: want an http:// or https:// URL", k.URL)
	case u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		bad("control.url %q: want scheme://host[:port][/path], no user, query or fragment", k.URL)
	case !plainArg(k.URL):
		bad("control.url %q: spaces, quotes, backslashes, $ and control characters are not allowed", k.URL)
	}
	switch {
	case k.Token == "" && k.TokenFile == "":
		bad("control: token or token_file required")
	case k.Token != "" && k.TokenFile != "":
		bad("control: token and token_file both set; give one")
	case k.Token != "" && !plainArg(k.Token):
		bad("control.token: must be one line without spaces, quotes, backslashes or $, at most 4096 bytes")
	}
	path := func(key, v string) {
		if v != "" && !validPath(v) {
			bad("%s %q: want an absolute, clean path without spaces, quotes, backslashes or $", key, v)
		}
	}
	path("control.token_file", k.TokenFile)
	path("control.ca_file", k.CAFile)
	path("control.cert_file", k.CertFile)
	path("control.key_file", k.KeyFile)
	if (k.CertFile == "") != (k.KeyFile == "") {
		bad("control: cert_file and key_file go together (cert_file %q, key_file %q)", k.CertFile, k.KeyFile)
	}
}

func validPath(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && plainArg(p)
}

// forbidden are the characters no rendered argument may hold: systemd
// splits $RAMPART_ARGS on whitespace and would unquote or expand the rest.
const forbidden = " \"'\\$`"

// plainArg says whether s can be one word of $RAMPART_ARGS as is.
func plainArg(s string) bool {
	if s == "" || len(s) > 4096 || strings.ContainsAny(s, forbidden) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}
