package agent

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/bpf"
)

// Defaults of Config.
const (
	DefaultAdminAddr     = "127.0.0.1:9902"
	DefaultProxyAdmin    = "127.0.0.1:9901" // the flag's default
	DefaultHandoffSocket = "/run/rampart/handoff.sock"
	DefaultVIPInterface  = "rampart0"
	DefaultPoll          = 250 * time.Millisecond
	DefaultNetns         = "/proc/self/ns/net"
)

// Config is what `rampart agent` is told by its flags.
type Config struct {
	Interfaces []string    // XDP is attached to each (in the agent's network namespace)
	XDPMode    bpf.XDPMode // XDPAuto (default): driver mode when the driver has it, else generic
	PinRoot    string      // bpffs directory of maps and links; default bpf.DefaultPinRoot
	Maps       bpf.Options // map sizes; a change needs a teardown (a gap in protection)
	Netns      string      // network namespace steered by sk_lookup; default DefaultNetns
	Cgroup     string      // cgroup v2 directory of the connection tracker; "" : the cgroup2 root

	SnapshotDir   string            // the proxy's snapshot directory (*.snap)
	StateDir      string            // the agent's own state: last-known-good snapshot, deny list, VIPs, socket slots
	PublicKey     ed25519.PublicKey // verifies snapshots and deny files
	DenyFile      string            // the fast deny channel's signed list; "" : none
	HandoffSocket string            // the proxy's socket hand-off; default DefaultHandoffSocket
	ProxyAdmin    string            // the proxy's admin listener (/readyz, /metrics); "" : not polled
	AdminAddr     string            // the agent's admin listener; default DefaultAdminAddr

	VIPInterface string // default DefaultVIPInterface
	KeepVIPs     bool   // leave the VIPs in place on stop (a quick restart)

	// NewSources and NewSourceBurst bound how fast unknown sources get
	// per-source state (bpf.Limits); the snapshot has no such setting.
	NewSources, NewSourceBurst uint64
	// Region: only endpoints of this region (or of none) count for the
	// upstreams share; "" : all.
	Region string

	Anycast *anycast.Config // nil: no BGP; see ReadAnycastConfig
	// RegionState is the signed region-state document (the proxy's
	// -region-state); "" : none (region health is not considered).
	// RegionStateMaxAge bounds its age (default 30 s). TenantGroups maps a
	// group name to tenant ids for the region_serves_tenants:GROUP inputs.
	RegionState       string
	RegionStateMaxAge time.Duration
	TenantGroups      map[string][]string
	// SiteName is this site's name at the control plane (the proxy's
	// -node-id): its own entry in the region state's sites. Default: the
	// host name.
	SiteName string
	// AdminToken authorizes the admin API's writes (operator drains);
	// "" : writes are refused (403). See ReadAdminToken.
	AdminToken string
	Poll       time.Duration // snapshot dir, VIP and proxy polls; default and at most DefaultPoll
	Logger     *slog.Logger
	// Started, when set, is called once the admin listener is up.
	Started func(admin net.Addr)
}

// limitsExtra are the limits the agent adds to the snapshot's.
func (c *Config) limitsExtra() bpf.Limits {
	return bpf.Limits{NewSources: c.NewSources, NewSourceBurst: c.NewSourceBurst}
}

func (c *Config) setDefaults() error {
	if c.PinRoot == "" {
		c.PinRoot = bpf.DefaultPinRoot
	}
	if c.Netns == "" {
		c.Netns = DefaultNetns
	}
	if c.HandoffSocket == "" {
		c.HandoffSocket = DefaultHandoffSocket
	}
	if c.AdminAddr == "" {
		c.AdminAddr = DefaultAdminAddr
	}
	if c.VIPInterface == "" {
		c.VIPInterface = DefaultVIPInterface
	}
	if c.Poll <= 0 || c.Poll > DefaultPoll {
		c.Poll = DefaultPoll
	}
	if c.Maps.MaxSockets == 0 {
		c.Maps.MaxSockets = 64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SiteName == "" {
		c.SiteName, _ = os.Hostname()
	}
	var errs []error
	if c.StateDir == "" {
		errs = append(errs, errors.New("a state directory is required"))
	}
	if c.SnapshotDir == "" {
		errs = append(errs, errors.New("a snapshot directory is required"))
	}
	if len(c.PublicKey) != ed25519.PublicKeySize {
		errs = append(errs, errors.New("a snapshot public key is required"))
	}
	if len(c.Interfaces) == 0 {
		errs = append(errs, errors.New("at least one interface is required for XDP"))
	}
	return errors.Join(errs...)
}

// Preflight checks what the agent needs before it touches anything: the
// capabilities (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON) and a bpffs mounted at
// the pin root's parent. Mounting bpffs needs CAP_SYS_ADMIN, which the agent
// does not have: that is the service unit's job.
func Preflight(pinRoot string) error {
	if pinRoot == "" {
		pinRoot = bpf.DefaultPinRoot
	}
	if err := bpf.Probe(); err != nil {
		var ce *bpf.CapabilityError
		if errors.As(err, &ce) && len(ce.Missing) > 0 {
			return fmt.Errorf("the agent needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON: %w "+
				"(grant them in the service unit: AmbientCapabilities=CAP_BPF CAP_NET_ADMIN CAP_PERFMON)", err)
		}
		return fmt.Errorf("rampart agent: %w", err)
	}
	return checkBPFFS(pinRoot)
}

// checkBPFFS wants the pin root, or else its parent, on a bpffs.
func checkBPFFS(pinRoot string) error {
	dir := pinRoot
	if _, err := os.Stat(dir); err != nil {
		dir = filepath.Dir(pinRoot)
	}
	fs, err := statfsType(dir)
	if err != nil {
		return fmt.Errorf("bpffs is not mounted at %s (the pin root's parent): %w; "+
			"mounting it is the service unit's job (mount -t bpf bpf %s), the agent has no CAP_SYS_ADMIN", dir, err, dir)
	}
	if fs != bpffsMagic {
		return fmt.Errorf("bpffs is not mounted at %s (the pin root's parent); "+
			"mounting it is the service unit's job (mount -t bpf bpf %s), the agent has no CAP_SYS_ADMIN", dir, dir)
	}
	return nil
}

// ReadAnycastConfig reads the anycast section of a node: the YAML of
// anycast.Config (strict: unknown or duplicate keys, a second document are
// errors), with defaults filled. Its vips may be left out: the agent
// announces the active snapshot's VIPs (see README); listed ones lend their
// attributes and inputs to the VIPs they equal or cover. Every other
// problem is reported as anycast's validation would.
func ReadAnycastConfig(path string) (*anycast.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("anycast config: %w", err)
	}
	if len(data) > anycast.MaxConfigBytes {
		return nil, fmt.Errorf("anycast config %s: larger than %d bytes", path, anycast.MaxConfigBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c anycast.Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("anycast config %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("anycast config %s: a second document or trailing data", path)
	}
	c.Normalize()
	probe := c
	if len(probe.VIPs) == 0 {
		// The snapshot's VIPs get the global inputs; check the rest with one.
		probe.VIPs = []anycast.VIP{{Prefix: "192.0.2.1/32"}}
	}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("anycast config %s: %w", path, err)
	}
	return &c, nil
}

const bpffsMagic = unix.BPF_FS_MAGIC

func statfsType(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Type, nil
}
