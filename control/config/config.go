// Package config reads the control plane's config file (YAML, strict:
// unknown keys are errors). See control/README.md for the format.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/control/rollout"
)

// Duration is a time.Duration written as "30s", "5m".
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// D is the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is the control plane's config file.
type Config struct {
	Listen       string   `yaml:"listen"`      // default 127.0.0.1:9080
	SigningKey   string   `yaml:"signing_key"` // Ed25519 PEM private key (rampart keygen)
	TLS          *TLS     `yaml:"tls"`
	Tokens       []Token  `yaml:"tokens"`
	Storage      Storage  `yaml:"storage"`
	WatchTimeout Duration `yaml:"watch_timeout"` // default 30s
	Rollout      Rollout  `yaml:"rollout"`
	// Regions is the rule that judges regional health from node reports;
	// RegionState how often the region-state document is refreshed.
	Regions     Regions     `yaml:"regions"`
	RegionState RegionState `yaml:"region_state"`

	// AllowSharedNodeTokens keeps tokens of role node, shared by every
	// node, working while nodes are enrolled one by one (migration); off
	// by default, and such a token never speaks for an enrolled node.
	AllowSharedNodeTokens bool `yaml:"allow_shared_node_tokens"`
}

// TLS serves the API over TLS; with ClientCAFile, clients must present a
// certificate signed by it (mTLS) besides their token.
type TLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Token is a bearer token: its SHA-256 (hex), or a file holding the token.
type Token struct {
	Name      string `yaml:"name"`
	Role      string `yaml:"role"` // admin, read, monitor (replica lag pushes only), node (shared: only with allow_shared_node_tokens)
	SHA256    string `yaml:"sha256"`
	TokenFile string `yaml:"token_file"`
}

// Storage picks the store.
type Storage struct {
	Type     string   `yaml:"type"` // embedded (default) or postgres
	Dir      string   `yaml:"dir"`  // embedded: data directory
	Postgres Postgres `yaml:"postgres"`
}

// Postgres configures the HA store.
type Postgres struct {
	DSN      string   `yaml:"dsn"`
	DSNEnv   string   `yaml:"dsn_env"`   // read the DSN from this environment variable instead
	LeaseTTL Duration `yaml:"lease_ttl"` // default 10s
	Instance string   `yaml:"instance"`  // default host-pid-random
	// TxIdleTimeout: the server ends a write transaction idle this long
	// (a paused leader), freeing its locks; default lease_ttl/2, below
	// lease_ttl, above the longest pause inside a write (signing).
	TxIdleTimeout Duration `yaml:"tx_idle_timeout"`
}

// Rollout configures staged rollouts.
type Rollout struct {
	Tick          Duration  `yaml:"tick"`           // engine period, default 1s
	NodeTimeout   Duration  `yaml:"node_timeout"`   // default 30s
	ActiveTimeout Duration  `yaml:"active_timeout"` // default 5m
	Bake          *Duration `yaml:"bake"`           // default 5m when unset; 0s is no bake
	Stages        []Stage   `yaml:"stages"`         // default canary, zone-a, region-a, all
	Health        struct {
		MaxErrorRateIncrease *float64 `yaml:"max_error_rate_increase"` // default 0.01
		MinRequests          *uint64  `yaml:"min_requests"`            // default 100
		MaxLatencyIncreaseMs float64  `yaml:"max_latency_increase_ms"` // default 0: off
	} `yaml:"health"`
	Shadow struct {
		MaxUnexpectedDifferences *int `yaml:"max_unexpected_differences"` // default 0: pause on any; -1: never
		MaxListed                int  `yaml:"max_listed"`                 // default 100
	} `yaml:"shadow"`
}

// Regions is the regional health rule (plane.RegionRule): a region is
// healthy when at least MinReadyPercent % of its nodes with a fresh report
// are ready and, for each critical cluster, at least that share of them
// report a healthy endpoint of it.
type Regions struct {
	MinReadyPercent  int      `yaml:"min_ready_percent"` // 1..100, default 60
	CriticalClusters []string `yaml:"critical_clusters"` // default none
	ReportMaxAge     Duration `yaml:"report_max_age"`    // default 10s
}

// RegionState configures the region-state document's publication.
type RegionState struct {
	Refresh Duration `yaml:"refresh"` // a new document at least this often; default 5s, 100ms..1m
}

// Stage is a rollout stage; region, zone and cohort select its nodes (all
// empty: every node).
type Stage struct {
	Name   string    `yaml:"name"`
	Region string    `yaml:"region"`
	Zone   string    `yaml:"zone"`
	Cohort string    `yaml:"cohort"`
	Bake   *Duration `yaml:"bake"` // unset: rollout.bake; 0s is no bake
}

// Parse reads a config strictly and fills defaults.
func Parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("control config: %w", err)
	}
	c.defaults()
	return &c, c.validate()
}

// Load reads a config file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("control config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func setDur(d *Duration, v time.Duration) {
	if *d == 0 {
		*d = Duration(v)
	}
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:9080"
	}
	if c.Storage.Type == "" {
		c.Storage.Type = "embedded"
	}
	setDur(&c.WatchTimeout, 30*time.Second)
	setDur(&c.Storage.Postgres.LeaseTTL, 10*time.Second)
	setDur(&c.Storage.Postgres.TxIdleTimeout, c.Storage.Postgres.LeaseTTL.D()/2)
	if c.Regions.MinReadyPercent == 0 {
		c.Regions.MinReadyPercent = 60
	}
	setDur(&c.Regions.ReportMaxAge, 10*time.Second)
	setDur(&c.RegionState.Refresh, 5*time.Second)
	r := &c.Rollout
	setDur(&r.Tick, time.Second)
	setDur(&r.NodeTimeout, 30*time.Second)
	setDur(&r.ActiveTimeout, 5*time.Minute)
	if r.Bake == nil {
		d := Duration(5 * time.Minute)
		r.Bake = &d
	}
	if r.Health.MaxErrorRateIncrease == nil {
		v := 0.01
		r.Health.MaxErrorRateIncrease = &v
	}
	if r.Health.MinRequests == nil {
		v := uint64(100)
		r.Health.MinRequests = &v
	}
	if r.Shadow.MaxUnexpectedDifferences == nil {
		v := 0
		r.Shadow.MaxUnexpectedDifferences = &v
	}
	if r.Shadow.MaxListed == 0 {
		r.Shadow.MaxListed = 100
	}
	if len(r.Stages) == 0 {
		for _, s := range rollout.DefaultStages() {
			r.Stages = append(r.Stages, Stage{Name: s.Name, Region: s.Match.Region, Zone: s.Match.Zone, Cohort: s.Match.Cohort})
		}
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.SigningKey == "" {
		errs = append(errs, errors.New("signing_key is required"))
	}
	if p := c.Regions.MinReadyPercent; p < 1 || p > 100 {
		errs = append(errs, fmt.Errorf("regions.min_ready_percent %d is outside 1..100", p))
	}
	if d := c.Regions.ReportMaxAge.D(); d < 0 {
		errs = append(errs, fmt.Errorf("regions.report_max_age %s is negative", d))
	}
	for i, cl := range c.Regions.CriticalClusters {
		if cl == "" {
			errs = append(errs, fmt.Errorf("regions.critical_clusters[%d] is empty", i))
		}
	}
	if d := c.RegionState.Refresh.D(); d < 100*time.Millisecond || d > time.Minute {
		errs = append(errs, fmt.Errorf("region_state.refresh %s is outside 100ms..1m", d))
	}
	if len(c.Tokens) == 0 {
		errs = append(errs, errors.New("tokens: at least one token is required (the API is never open)"))
	}
	for i, t := range c.Tokens {
		switch api.Role(t.Role) {
		case api.RoleAdmin, api.RoleRead, api.RoleNode, api.RoleMonitor:
		default:
			errs = append(errs, fmt.Errorf("tokens[%d] %q: role %q must be admin, read, monitor or node", i, t.Name, t.Role))
		}
		if api.Role(t.Role) == api.RoleNode && !c.AllowSharedNodeTokens {
			errs = append(errs, fmt.Errorf("tokens[%d] %q: a node token shared by every node lets any holder speak for any node: enrol each node instead (POST /v1/nodes/{id}/enroll), or set allow_shared_node_tokens: true while migrating", i, t.Name))
		}
		if (t.SHA256 == "") == (t.TokenFile == "") {
			errs = append(errs, fmt.Errorf("tokens[%d] %q: give exactly one of sha256 and token_file", i, t.Name))
		}
	}
	switch c.Storage.Type {
	case "embedded":
		if c.Storage.Dir == "" {
			errs = append(errs, errors.New("storage.dir is required for the embedded store"))
		}
	case "postgres":
		if (c.Storage.Postgres.DSN == "") == (c.Storage.Postgres.DSNEnv == "") {
			errs = append(errs, errors.New("storage.postgres: give exactly one of dsn and dsn_env"))
		}
		if pg := c.Storage.Postgres; pg.TxIdleTimeout.D() <= 0 || pg.TxIdleTimeout.D() >= pg.LeaseTTL.D() {
			errs = append(errs, fmt.Errorf("storage.postgres.tx_idle_timeout %s must be above 0 and below lease_ttl %s (a paused leader's locks must go before another takes over)",
				pg.TxIdleTimeout.D(), pg.LeaseTTL.D()))
		}
	default:
		errs = append(errs, fmt.Errorf("storage.type %q must be embedded or postgres", c.Storage.Type))
	}
	if c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls needs cert_file and key_file"))
	}
	pol := c.Policy()
	if err := pol.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Policy is the rollout policy the config describes.
func (c *Config) Policy() rollout.Policy {
	r := c.Rollout
	p := rollout.Policy{ActiveTimeout: r.ActiveTimeout.D(), NodeTimeout: r.NodeTimeout.D(),
		Health: rollout.Health{MaxErrorRateIncrease: *r.Health.MaxErrorRateIncrease, MinRequests: *r.Health.MinRequests,
			MaxLatencyIncreaseMs: r.Health.MaxLatencyIncreaseMs}}
	if r.Bake != nil {
		p.Bake = r.Bake.D()
	}
	for _, s := range r.Stages {
		st := rollout.Stage{Name: s.Name, Match: rollout.Match{Region: s.Region, Zone: s.Zone, Cohort: s.Cohort}}
		if s.Bake != nil {
			b := s.Bake.D()
			st.Bake = &b
		}
		p.Stages = append(p.Stages, st)
	}
	return p
}

// RegionRule is the regional health rule for the plane.
func (c *Config) RegionRule() plane.RegionRule {
	return plane.RegionRule{MinReadyPercent: c.Regions.MinReadyPercent, CriticalClusters: c.Regions.CriticalClusters, ReportMaxAge: c.Regions.ReportMaxAge.D()}
}

// Shadow is the shadow check policy.
func (c *Config) Shadow() plane.ShadowPolicy {
	return plane.ShadowPolicy{MaxUnexpected: *c.Rollout.Shadow.MaxUnexpectedDifferences, MaxListed: c.Rollout.Shadow.MaxListed}
}

// APITokens resolves the tokens (reading token files).
func (c *Config) APITokens() ([]api.Token, error) {
	var out []api.Token
	for _, t := range c.Tokens {
		h := t.SHA256
		if t.TokenFile != "" {
			data, err := os.ReadFile(t.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("token %q: %w", t.Name, err)
			}
			tok := strings.TrimSpace(string(data))
			if len(tok) < 16 {
				return nil, fmt.Errorf("token %q: %s holds fewer than 16 characters", t.Name, t.TokenFile)
			}
			h = api.HashToken(tok)
		}
		sum, err := api.ParseTokenHash(h)
		if err != nil {
			return nil, fmt.Errorf("token %q: %w", t.Name, err)
		}
		out = append(out, api.Token{Name: t.Name, Role: api.Role(t.Role), SHA256: sum})
	}
	return out, nil
}

// PostgresDSN is the DSN, from the file or the environment.
func (c *Config) PostgresDSN() (string, error) {
	p := c.Storage.Postgres
	if p.DSNEnv == "" {
		return p.DSN, nil
	}
	if v := os.Getenv(p.DSNEnv); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("storage.postgres.dsn_env: %s is not set", p.DSNEnv)
}
