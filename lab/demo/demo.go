// Package demo is the lab's demo material: the snapshot config (two tenants,
// a read, a write, a JWT and an API-key route, three regions, two VIPs,
// limits), the control plane's config (regions rule, rollout stages with a
// canary cohort and a health gate, tokens), the keys and tokens behind
// them, and JWT minting for curl. See
// lab/demo/README.md.
package demo

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Names the demo config uses; drills and the lab's help text refer to them.
const (
	Platform          = "app-db" // the platform of every route with a tenant decision
	FixedTenant       = "acme"   // failover_mode fixed, primary eu
	BackupTenant      = "globex" // failover_mode primary_backup, primary eu, backup us
	FixedPrimary      = "eu"     // acme's region
	BackupPrimary     = "eu"     // globex's primary
	BackupRegion      = "us"     // globex's backup
	WriterRegion      = "eu"     // the platform's writer to set at start (Writer)
	CanaryCohort      = "canary" // the cohort of the rollout's first stage
	Issuer            = "https://id.lab.rampart.test/"
	Audience          = "demo"
	JWTKeyID          = "lab-1"
	ListenPort        = 8080 // the proxy's listeners: 127.0.0.1:8080 and [::1]:8080 in each site
	VIPPort           = 80   // steered to them by the agent
	HealthPath        = "/healthz"
	ListenerV4        = "http4"
	ListenerV6        = "http6"
	ScopeRead         = "items:read"
	ScopeWrite        = "items:write"
	RegionStateMaxAge = 60 * time.Second // pass as -region-state-max-age to proxies and agents
)

// Site is one lab site: a node (agent + proxy) and its two upstreams.
type Site struct {
	Name   string // node id at the control plane (-node-id) and the agent's -site-name
	ID     int    // anycast site_id, unique, ≥ 1
	Region string
	Zone   string
	Cohort string // "canary" for the rollout's first stage, else ""
	// Upstreams are the site's two upstreams (GET /healthz → 200; any
	// other path answers naming the site and region). Every site's proxy
	// must reach every site's upstreams (platform routes may go to another
	// region).
	Upstreams []netip.AddrPort
}

// Sites is the default plan, the lab's topology (lab/README.md): eu with
// two sites (eu1 in the canary cohort, eu2), us and ap with one each;
// site N's upstreams on its router-link address 198.51.100.(16N+2), ports
// 9081 and 9082.
func Sites() []Site {
	site := func(name, region, zone, cohort string, id int) Site {
		ip := netip.AddrFrom4([4]byte{198, 51, 100, byte(16*id + 2)})
		return Site{Name: name, ID: id, Region: region, Zone: zone, Cohort: cohort,
			Upstreams: []netip.AddrPort{netip.AddrPortFrom(ip, 9081), netip.AddrPortFrom(ip, 9082)}}
	}
	return []Site{
		site("eu1", "eu", "eu-a", CanaryCohort, 1),
		site("eu2", "eu", "eu-b", "", 2),
		site("us1", "us", "us-a", "", 3),
		site("ap1", "ap", "ap-a", "", 4),
	}
}

// Options of Write; the zero value is the default plan.
type Options struct {
	Sites         []Site            // default Sites()
	VIP4, VIP6    netip.Addr        // default 192.0.2.10 and 2001:db8::10
	ControlListen string            // the control plane's listen address; default 127.0.0.1:9080
	PostgresDSN   string            // with LAB_STORE=postgres: the control plane's DSN; empty: embedded store
	Limits        snapshot.L4Limits // default DefaultLimits
}

// DefaultLimits are the XDP limits per source (IPv4 /32, IPv6 /64).
var DefaultLimits = snapshot.L4Limits{PacketsPerSecond: 2000, PacketBurst: 4000, SYNPerSecond: 200, SYNBurst: 400, MaxConnectionsPerSource: 512}

// Default VIPs.
var (
	DefaultVIP4 = netip.MustParseAddr("192.0.2.10")
	DefaultVIP6 = netip.MustParseAddr("2001:db8::10")
)

func (o *Options) fill() {
	if o.Sites == nil {
		o.Sites = Sites()
	}
	if !o.VIP4.IsValid() {
		o.VIP4 = DefaultVIP4
	}
	if !o.VIP6.IsValid() {
		o.VIP6 = DefaultVIP6
	}
	if o.ControlListen == "" {
		o.ControlListen = "127.0.0.1:9080"
	}
	if o.Limits == (snapshot.L4Limits{}) {
		o.Limits = DefaultLimits
	}
}

func (o *Options) check() error {
	var errs []error
	if !o.VIP4.Is4() || !o.VIP6.Is6() || o.VIP6.Is4In6() {
		errs = append(errs, fmt.Errorf("VIPs %s and %s must be one IPv4 and one IPv6 address", o.VIP4, o.VIP6))
	}
	ids, names, regions := map[int]bool{}, map[string]bool{}, map[string]bool{}
	canary := false
	for _, s := range o.Sites {
		if s.Name == "" || s.Region == "" || s.Zone == "" || s.ID < 1 {
			errs = append(errs, fmt.Errorf("site %q: needs a name, a region, a zone and an id ≥ 1", s.Name))
		}
		if ids[s.ID] || names[s.Name] {
			errs = append(errs, fmt.Errorf("site %q (id %d): name or id used twice", s.Name, s.ID))
		}
		ids[s.ID], names[s.Name], regions[s.Region] = true, true, true
		if len(s.Upstreams) == 0 {
			errs = append(errs, fmt.Errorf("site %q: no upstreams", s.Name))
		}
		canary = canary || s.Cohort == CanaryCohort
	}
	for _, r := range []string{FixedPrimary, BackupPrimary, BackupRegion} {
		if !regions[r] {
			errs = append(errs, fmt.Errorf("no site in region %s, which the demo tenants use", r))
		}
	}
	if !canary {
		errs = append(errs, fmt.Errorf("no site in cohort %q (the rollout's first stage)", CanaryCohort))
	}
	return errors.Join(errs...)
}

// Regions are the regions of the sites, in the order they first appear.
func Regions(sites []Site) []string {
	var out []string
	for _, s := range sites {
		if !slices.Contains(out, s.Region) {
			out = append(out, s.Region)
		}
	}
	return out
}

// Paths are the files Write made (all in its directory).
type Paths struct {
	Dir          string
	Snapshot     string            // snapshot.yaml: submit it (POST /v1/revisions or rampart control submit -f)
	Control      string            // control.yaml: rampart control -config
	SnapshotKey  string            // snapshot.key: the control plane signs with it
	SnapshotPub  string            // snapshot.pub: proxies' and agents' -public-key
	JWTKey       string            // jwt.key: Token signs with it
	JWKS         string            // jwks.json: the JWT policy's jwks_file
	AdminToken   string            // admin.token: the operator token (role admin)
	ReadToken    string            // read.token (role read)
	MonitorToken string            // monitor.token (role monitor: replica lag pushes)
	APIKeys      map[string]string // tenant → file holding its API key (X-Api-Key)
}

func pathsIn(dir string) *Paths {
	j := func(n string) string { return filepath.Join(dir, n) }
	return &Paths{Dir: dir, Snapshot: j("snapshot.yaml"), Control: j("control.yaml"),
		SnapshotKey: j("snapshot.key"), SnapshotPub: j("snapshot.pub"), JWTKey: j("jwt.key"), JWKS: j("jwks.json"),
		AdminToken: j("admin.token"), ReadToken: j("read.token"), MonitorToken: j("monitor.token"),
		APIKeys: map[string]string{FixedTenant: j("api-key-" + FixedTenant), BackupTenant: j("api-key-" + BackupTenant)}}
}

//go:embed snapshot.yaml.tmpl
var snapshotTmpl string

//go:embed control.yaml.tmpl
var controlTmpl string

var funcs = template.FuncMap{"join": strings.Join}

// Write makes dir (if needed) and writes the demo's files into it. Keys,
// tokens and API keys already there are kept (a second lab up reuses
// them, so a running control plane's store and the nodes' keys still
// match); the two configs are rendered again each time.
func Write(dir string, o Options) (*Paths, error) {
	o.fill()
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("demo options: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	p := pathsIn(dir)
	if err := ensureKeyPair(p.SnapshotKey, p.SnapshotPub); err != nil {
		return nil, err
	}
	if err := ensureJWTKey(p.JWTKey, p.JWKS); err != nil {
		return nil, err
	}
	var shas [3]string
	for i, f := range []string{p.AdminToken, p.ReadToken, p.MonitorToken} {
		tok, err := ensureSecret(f)
		if err != nil {
			return nil, err
		}
		shas[i] = api.HashToken(tok)
	}
	type key struct{ ID, SHA256, Tenant string }
	var keys []key
	for _, t := range []string{FixedTenant, BackupTenant} {
		k, err := ensureSecret(p.APIKeys[t])
		if err != nil {
			return nil, err
		}
		keys = append(keys, key{ID: t + "-key", SHA256: api.HashToken(k), Tenant: t})
	}

	type region struct {
		Name  string
		Zones []string
	}
	var regions []region
	for _, name := range Regions(o.Sites) {
		r := region{Name: name}
		for _, s := range o.Sites {
			if s.Region == name && !slices.Contains(r.Zones, s.Zone) {
				r.Zones = append(r.Zones, s.Zone)
			}
		}
		regions = append(regions, r)
	}
	snap, err := render("snapshot", snapshotTmpl, map[string]any{
		"ListenPort": ListenPort, "VIP4": o.VIP4, "VIP6": o.VIP6, "Limits": o.Limits,
		"Regions": regions, "RegionNames": Regions(o.Sites), "Sites": o.Sites, "Platform": Platform,
		"FixedPrimary": FixedPrimary, "BackupPrimary": BackupPrimary, "BackupRegion": BackupRegion,
		"RegionStateMaxAgeMs": RegionStateMaxAge.Milliseconds(), "MaxSignalAgeMs": MaxSignalAge.Milliseconds(),
		"Issuer": Issuer, "Audience": Audience, "JWKSFile": p.JWKS, "APIKeys": keys,
	})
	if err != nil {
		return nil, err
	}
	ctl, err := render("control", controlTmpl, map[string]any{
		"ControlListen": o.ControlListen, "SnapshotKey": p.SnapshotKey,
		"AdminSHA": shas[0], "ReadSHA": shas[1], "MonitorSHA": shas[2],
		"PostgresDSN": o.PostgresDSN, "StoreDir": filepath.Join(dir, "control"),
		"CanaryCohort": CanaryCohort, "CanaryBake": CanaryBake.String(), "MiddleStages": middleStages(o.Sites),
	})
	if err != nil {
		return nil, err
	}
	if err := writeFile(p.Snapshot, snap, 0o644); err != nil {
		return nil, err
	}
	if err := writeFile(p.Control, ctl, 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// CanaryBake is the canary stage's bake: node reports come every 5 s, so
// the health gate sees at least two of them before the stage passes.
const CanaryBake = 15 * time.Second

// MaxSignalAge is the platform routes' max_signal_age_ms: the replica lags
// pushed once (Lags) stay usable this long. The control plane keeps lags
// in memory only: push them again after it restarts.
const MaxSignalAge = time.Hour

// middleStages are the stages between canary and all: one per region with
// more than one site (the default plan: eu).
func middleStages(sites []Site) []string {
	var out []string
	for _, r := range Regions(sites) {
		n := 0
		for _, s := range sites {
			if s.Region == r {
				n++
			}
		}
		if n > 1 {
			out = append(out, r)
		}
	}
	return out
}

func render(name, text string, data any) ([]byte, error) {
	t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("demo %s template: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("demo %s template: %w", name, err)
	}
	return b.Bytes(), nil
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// ensureSecret returns the secret in path, making a random one first when
// the file does not exist.
func ensureSecret(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(data))
		if len(s) < 16 {
			return "", fmt.Errorf("demo: %s holds fewer than 16 characters", path)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("demo: %w", err)
	}
	tok, _, err := api.NewToken()
	if err != nil {
		return "", err
	}
	if err := writeFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return tok, nil
}

func ensureKeyPair(privPath, pubPath string) error {
	if _, err := os.Stat(privPath); err == nil {
		if _, err := snapshot.ReadPrivateKey(privPath); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if _, err := snapshot.ReadPublicKey(pubPath); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		return nil
	}
	priv, pub, err := snapshot.GenerateKey()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := writeFile(privPath, priv, 0o600); err != nil {
		return err
	}
	return writeFile(pubPath, pub, 0o644)
}

// ReadSecret reads a token or API key file Write made.
func ReadSecret(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}
