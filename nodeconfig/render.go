package nodeconfig

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/anycast"
)

// File names Render produces, relative to the output directory
// (/etc/rampart on a node).
const (
	AgentEnv   = "agent.env"
	ProxyEnv   = "proxy.env"
	AnycastYML = "anycast.yaml"
	TokenFile  = "node.token"
	PublicKey  = "snapshot.pub"
)

// HandoffSocket is where the proxy serves its sockets and the agent takes
// them (the agent's default).
const HandoffSocket = "/run/rampart/handoff.sock"

// File is one rendered file.
type File struct {
	Name string // relative to the output directory
	Data []byte
	// Secret files (the token, the anycast config with BGP passwords) are
	// written 0640 (group: the output directory's), the rest 0644.
	Secret bool
	// Env files replace only the RAMPART_ARGS line of the file already
	// there: its other lines (comments, GOMEMLIMIT=...) are kept.
	Env bool
}

// Render returns the files firstboot writes into dir (the directory the
// units read them from, /etc/rampart): agent.env and proxy.env always,
// anycast.yaml with a bgp section, node.token with an inline token,
// snapshot.pub with an inline key. Environment files hold one line,
// RAMPART_ARGS=..., which the units pass to `rampart agent|proxy`.
// Render expects a config Parse accepted.
func (c *Config) Render(dir string) ([]File, error) {
	var files []File
	// -keep-vips and the proxy's drain timings are on the units' ExecStart
	// lines (the package's), not here.
	agent := []string{"-interfaces", strings.Join(c.Interfaces, ","), "-handoff-socket", HandoffSocket,
		"-region", c.Node.Region, "-site-name", c.Node.ID}
	if c.XDPMode != "" && c.XDPMode != "auto" {
		agent = append(agent, "-xdp-mode", c.XDPMode)
	}
	if c.SnapshotPublicKey != "" {
		files = append(files, File{Name: PublicKey, Data: []byte(strings.TrimSpace(c.SnapshotPublicKey) + "\n")})
	}
	pub := filepath.Join(dir, PublicKey)
	agent = append(agent, "-public-key", pub)
	if c.BGP != nil {
		data, err := c.anycastYAML()
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: AnycastYML, Data: data, Secret: true})
		agent = append(agent, "-anycast-config", filepath.Join(dir, AnycastYML))
	}
	proxy := []string{"-handoff-socket", HandoffSocket, "-region", c.Node.Region, "-public-key", pub}
	if k := c.Control; k != nil {
		tok := k.TokenFile
		if k.Token != "" {
			files = append(files, File{Name: TokenFile, Data: []byte(k.Token + "\n"), Secret: true})
			tok = filepath.Join(dir, TokenFile)
		}
		proxy = append(proxy, "-control-url", k.URL, "-control-token-file", tok, "-node-id", c.Node.ID)
		for _, f := range [][2]string{{"-zone", c.Node.Zone}, {"-cohort", c.Node.Cohort},
			{"-control-ca", k.CAFile}, {"-control-cert", k.CertFile}, {"-control-key", k.KeyFile}} {
			if f[1] != "" {
				proxy = append(proxy, f[0], f[1])
			}
		}
		// The agent's admin listener is the default; reports then say which
		// VIP prefixes it announces.
		proxy = append(proxy, "-agent-status-url", "http://127.0.0.1:9902")
	}
	agent = append(agent, c.AgentArgs...)
	proxy = append(proxy, c.ProxyArgs...)
	for _, a := range append(append([]string{}, agent...), proxy...) {
		if !plainArg(a) {
			return nil, fmt.Errorf("render: argument %q is empty or has a space, quote, backslash, $ or control character", a)
		}
	}
	if !plainArg(dir) {
		return nil, fmt.Errorf("render: output directory %q has a space, quote, backslash or $", dir)
	}
	env := func(args []string) []byte {
		return []byte("# Written by rampart firstboot from node.yaml; edit node.yaml instead.\nRAMPART_ARGS=" + strings.Join(args, " ") + "\n")
	}
	files = append(files, File{Name: AgentEnv, Data: env(agent), Env: true}, File{Name: ProxyEnv, Data: env(proxy), Env: true})
	return files, nil
}

// anycastFile is the subset of anycast.Config node.yaml sets, with the
// anycast package's keys; omitted keys take its defaults.
type anycastFile struct {
	LocalAS   uint32         `yaml:"local_as"`
	RouterID  string         `yaml:"router_id"`
	SiteID    uint32         `yaml:"site_id"`
	NextHopV4 string         `yaml:"next_hop_v4,omitempty"`
	NextHopV6 string         `yaml:"next_hop_v6,omitempty"`
	Peers     []anycastPeer  `yaml:"peers"`
	VIPs      []anycastVIP   `yaml:"vips,omitempty"`
	Inputs    []anycastInput `yaml:"inputs"`
	Guard     anycastGuard   `yaml:"guard"`
}

type anycastPeer struct {
	Address      string   `yaml:"address"`
	AS           uint32   `yaml:"as"`
	Port         int      `yaml:"port,omitempty"`
	LocalAddress string   `yaml:"local_address,omitempty"`
	Password     string   `yaml:"password,omitempty"`
	MultihopTTL  int      `yaml:"multihop_ttl,omitempty"`
	HoldTimeS    int      `yaml:"hold_time_s,omitempty"`
	Families     []string `yaml:"families,omitempty,flow"`
}

type anycastVIP struct {
	Prefix string `yaml:"prefix"`
}

type anycastInput struct {
	Name   string `yaml:"name"`
	Kind   string `yaml:"kind"`
	Global bool   `yaml:"global"`
}

type anycastGuard struct {
	MinSites     *int   `yaml:"min_sites,omitempty"`
	Sites        int    `yaml:"sites,omitempty"`
	CommunityASN uint32 `yaml:"community_asn"`
}

// anycastYAML is the agent's -anycast-config: the BGP section, the VIPs,
// and the two global inputs every VIP needs (the proxy ready, XDP in
// place), which the agent feeds.
func (c *Config) anycastYAML() ([]byte, error) {
	b := c.BGP
	f := anycastFile{LocalAS: b.LocalAS, RouterID: b.RouterID, SiteID: b.SiteID,
		NextHopV4: b.NextHopV4, NextHopV6: b.NextHopV6,
		Inputs: []anycastInput{{Name: "proxy_ready", Kind: "bool", Global: true}, {Name: "xdp", Kind: "bool", Global: true}},
		Guard:  anycastGuard{MinSites: b.MinSites, Sites: b.Sites, CommunityASN: b.CommunityASN}}
	for _, p := range b.Peers {
		f.Peers = append(f.Peers, anycastPeer(p))
	}
	for _, v := range c.VIPs {
		f.VIPs = append(f.VIPs, anycastVIP{Prefix: v})
	}
	var buf bytes.Buffer
	buf.WriteString("# Written by rampart firstboot from node.yaml; edit node.yaml instead.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("render anycast config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render anycast config: %w", err)
	}
	return buf.Bytes(), nil
}

// checkAnycast renders the anycast config and validates it the way the
// agent will (anycast.ParseYAML). Without VIPs the agent takes the
// snapshot's, so one documentation address stands in, as the agent does.
func (c *Config) checkAnycast() error {
	probe := *c
	if len(probe.VIPs) == 0 {
		probe.VIPs = []string{"192.0.2.1/32"}
	}
	data, err := probe.anycastYAML()
	if err != nil {
		return err
	}
	_, err = anycast.ParseYAML(data)
	return err
}
