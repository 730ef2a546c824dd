// Package lab is `rampart lab`: three regions of real rampart nodes in
// network namespaces on one machine — a client, a BIRD 2 router, four
// sites (agent with XDP, sk_lookup and anycast; proxy following the control
// plane; two upstreams) and a control plane — plus failure drills run
// against it. Everything it makes is recorded in a state file, so Down
// removes exactly that, also after a crash. See lab/README.md.
package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DefaultStateDir is where `rampart lab up` keeps its state by default.
const DefaultStateDir = ".rampart-lab"

// stateFile is the name of the state file in the state directory.
const stateFile = "lab.json"

// Lab is a running lab, as recorded in its state file. Drills get one
// from Up or Load and use its methods; they never need to know the
// namespace plumbing.
type Lab struct {
	Dir     string    `json:"dir"`    // the state directory (absolute)
	Binary  string    `json:"binary"` // the rampart binary the processes run
	Prefix  string    `json:"prefix"` // namespace name prefix
	Store   string    `json:"store"`  // embedded or postgres
	Created time.Time `json:"created"`

	Client  Client   `json:"client"`
	Router  Router   `json:"router"`
	Control Control  `json:"control"`
	Sites   []*Site  `json:"sites"`
	VIPs    []string `json:"vips"` // the anycast VIPs (addresses), v4 first

	// What Down removes, recorded before each is made.
	Namespaces []string `json:"namespaces"` // names under /run/netns
	Mounts     []string `json:"mounts"`     // bpffs mounts
	Cgroups    []string `json:"cgroups"`    // cgroup v2 directories, parents last
	Procs      []*Proc  `json:"procs"`      // every process the lab started
	TempDirs   []string `json:"temp_dirs"`  // outside Dir (PostgreSQL's data)
}

// Client is the client namespace: where test traffic comes from.
type Client struct {
	Netns string   `json:"netns"` // /run/netns/NAME
	V4    []string `json:"v4"`    // source addresses
	V6    []string `json:"v6"`
}

// Site is one node: agent, proxy and two upstreams in a namespace.
type Site struct {
	Name   string `json:"name"` // node id at the control plane
	Region string `json:"region"`
	Zone   string `json:"zone"`
	Cohort string `json:"cohort,omitempty"`
	ID     uint32 `json:"id"` // anycast site id; AS 65000+ID
	Netns  string `json:"netns"`
	Dir    string `json:"dir"` // the site's files

	AgentAdmin string `json:"agent_admin"` // http://127.0.0.1:9902 inside Netns
	ProxyAdmin string `json:"proxy_admin"` // http://127.0.0.1:9901 inside Netns
	// AgentTokenFile holds the bearer token of the agent's admin writes
	// (rampart anycast drain -token-file).
	AgentTokenFile string `json:"agent_token_file"`
	Addr4          string `json:"addr4"` // the site's addresses on its router link
	Addr6          string `json:"addr6"`
	// Upstreams are the two upstreams' addresses inside Netns.
	Upstreams []string `json:"upstreams"`
}

// Router is the router namespace running BIRD.
type Router struct {
	Netns string `json:"netns"`
	Sock  string `json:"sock"` // BIRD's control socket (birdc -s)
	Conf  string `json:"conf"`
	Log   string `json:"log"`
}

// Control is the control plane's namespace and credentials.
type Control struct {
	Netns string `json:"netns"`
	// URL is the control plane as the sites reach it; inside Netns it is
	// also at http://127.0.0.1:9080.
	URL            string `json:"url"`
	AdminTokenFile string `json:"admin_token_file"` // role admin
	ReadTokenFile  string `json:"read_token_file"`  // role read
	// MonitorTokenFile (role monitor) pushes replica lags.
	MonitorTokenFile string `json:"monitor_token_file"`
	// DemoDir holds the demo's files (lab/demo: demo.Token(DemoDir, ...)
	// mints JWTs; api-key-<tenant> files).
	DemoDir    string `json:"demo_dir"`
	Config     string `json:"config"`
	PublicKey  string `json:"public_key"` // verifies snapshots and deny lists
	SigningKey string `json:"signing_key"`
	// PGDir is the PostgreSQL data directory (LAB_STORE=postgres).
	PGDir string `json:"pg_dir,omitempty"`
}

// Load reads the state file of a running lab in stateDir.
func Load(stateDir string) (*Lab, error) {
	p := filepath.Join(stateDir, stateFile)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no lab in %s (rampart lab up first): %w", stateDir, err)
		}
		return nil, fmt.Errorf("read the lab state: %w", err)
	}
	var l Lab
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("parse %s: %w", p, err)
	}
	return &l, nil
}

// save writes the state file atomically.
func (l *Lab) save() error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the lab state: %w", err)
	}
	p := filepath.Join(l.Dir, stateFile)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write the lab state: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write the lab state: %w", err)
	}
	return nil
}

// Site returns the site of that name, or nil.
func (l *Lab) Site(name string) *Site {
	for _, s := range l.Sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// SiteOf returns the site whose link address addr is ("" when none): the
// site a proxy's request to an upstream came from.
func (l *Lab) SiteOf(addr string) string {
	for _, s := range l.Sites {
		if s.Addr4 == addr || s.Addr6 == addr {
			return s.Name
		}
	}
	return ""
}
