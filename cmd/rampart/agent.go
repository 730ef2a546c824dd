package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rampart-edge/rampart/agent"
	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// cmdAgent is `rampart agent [flags]`, and `rampart agent teardown [flags]`
// (or -teardown): detach and unpin everything and remove the agent's VIPs.
// Arguments left after the flags are an error: nothing runs.
func cmdAgent(args []string) error {
	teardownCmd := len(args) > 0 && args[0] == "teardown"
	if teardownCmd {
		args = args[1:]
	}
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	ifaces := fs.String("interfaces", "", "service interfaces XDP is attached to, comma-separated (e.g. eth0,eth1)")
	mode := fs.String("xdp-mode", "auto", "auto (driver when the driver has it, else generic), driver or generic")
	pinRoot := fs.String("pin-root", bpf.DefaultPinRoot, "bpffs directory for the pinned maps and links (its parent must be a mounted bpffs)")
	cgroup := fs.String("cgroup", "", "cgroup v2 directory the connection tracker sees (default: the cgroup2 root)")
	netns := fs.String("netns", agent.DefaultNetns, "network namespace whose sockets sk_lookup steers")
	dir := fs.String("snapshot-dir", "/var/lib/rampart/snapshots", "snapshot directory (the proxy's)")
	state := fs.String("state-dir", "/var/lib/rampart/agent", "the agent's own state: last-known-good snapshot, deny list, VIPs, socket slots")
	pubPath := fs.String("public-key", "/etc/rampart/snapshot.pub", "Ed25519 public key that signs snapshots and deny lists (PEM)")
	denyFile := fs.String("deny-file", "", "the fast deny channel's signed list (rampart deny build); its CIDRs go to XDP")
	handoffSock := fs.String("handoff-socket", agent.DefaultHandoffSocket, "the proxy's socket hand-off (proxy -handoff-socket)")
	admin := fs.String("admin", agent.DefaultAdminAddr, "admin listener: /healthz /readyz /status /metrics /anycast/status")
	proxyAdmin := fs.String("proxy-admin", agent.DefaultProxyAdmin, "the proxy's admin listener, polled for /readyz and upstream health (\"\" : none)")
	vipIface := fs.String("vip-interface", agent.DefaultVIPInterface, "interface that carries the VIPs (created as dummy, ifb or bridge when missing)")
	keepVIPs := fs.Bool("keep-vips", false, "leave the VIPs in place on stop (for a quick restart)")
	anycastPath := fs.String("anycast-config", "", "anycast (BGP) config YAML; without it nothing is announced")
	region := fs.String("region", "", "this node's region: only its endpoints (and those without one) count for the upstreams input")
	regionState := fs.String("region-state", "", "the signed region-state document (the proxy's -region-state); its region health feeds region_serves_tenants")
	regionStateMaxAge := fs.Duration("region-state-max-age", 30*time.Second, "a region-state document older than this counts as absent: the last health verdict stays (1s..24h)")
	tenantGroups := fs.String("tenant-groups", "", "YAML map of group -> tenant ids for the region_serves_tenants:GROUP anycast inputs (agent/README.md)")
	siteName := fs.String("site-name", "", "this site's name at the control plane (the proxy's -node-id; default: the host name): its entry in the region state's sites")
	adminTokenFile := fs.String("admin-token-file", "", "file holding the bearer token of the admin API's writes (rampart anycast drain/undrain); without it they are refused")
	poll := fs.Duration("poll", agent.DefaultPoll, "poll period of the snapshot dir and the proxy (at most 250ms)")
	newSrc := fs.Uint64("new-sources", 0, "per-second budget of sources getting per-source state under a spoofed flood (0: off)")
	newBurst := fs.Uint64("new-source-burst", 0, "burst of -new-sources (default: the rate)")
	maxSources := fs.Uint("max-sources", 1<<20, "per-source state slots (a change needs a teardown)")
	maxConnSources := fs.Uint("max-conn-sources", 1<<18, "sources with counted connections (a change needs a teardown)")
	maxVIPs := fs.Uint("max-vips", 4096, "VIP:port:proto entries per family (a change needs a teardown)")
	maxSockets := fs.Uint("max-sockets", 64, "steering socket slots (a change needs a teardown)")
	teardown := fs.Bool("teardown", false, "detach and unpin everything under -pin-root and remove the agent's VIPs, then exit")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		// Flags stop at the first non-flag: "rampart agent -x teardown" would
		// otherwise run a normal agent with "teardown" ignored.
		fmt.Fprintf(fs.Output(), "rampart agent: unexpected arguments %q; teardown is a subcommand: rampart agent teardown [flags]\n\n", fs.Args())
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q (usage above)", fs.Args())
	}

	c := agent.Config{
		PinRoot: *pinRoot, Cgroup: *cgroup, Netns: *netns, SnapshotDir: *dir, StateDir: *state,
		DenyFile: *denyFile, HandoffSocket: *handoffSock, AdminAddr: *admin, ProxyAdmin: *proxyAdmin,
		VIPInterface: *vipIface, KeepVIPs: *keepVIPs, Region: *region, Poll: *poll,
		RegionState: *regionState, RegionStateMaxAge: *regionStateMaxAge, SiteName: *siteName,
		NewSources: *newSrc, NewSourceBurst: *newBurst,
		Maps: bpf.Options{MaxSources: uint32(*maxSources), MaxConnSources: uint32(*maxConnSources),
			MaxVIPs: uint32(*maxVIPs), MaxSockets: uint32(*maxSockets)},
	}
	for _, s := range strings.Split(*ifaces, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Interfaces = append(c.Interfaces, s)
		}
	}
	switch *mode {
	case "auto":
		c.XDPMode = bpf.XDPAuto
	case "driver", "native":
		c.XDPMode = bpf.XDPDriver
	case "generic":
		c.XDPMode = bpf.XDPGeneric
	default:
		return fmt.Errorf("-xdp-mode %q: want auto, driver or generic", *mode)
	}
	c.Logger = newLogger()
	if teardownCmd || *teardown {
		if err := agent.Teardown(c); err != nil {
			return err
		}
		fmt.Printf("rampart agent: detached and unpinned everything under %s; removed the VIPs the agent added\n", c.PinRoot)
		return nil
	}
	pub, err := snapshot.ReadPublicKey(*pubPath)
	if err != nil {
		return err
	}
	c.PublicKey = pub
	if *anycastPath != "" {
		if c.Anycast, err = agent.ReadAnycastConfig(*anycastPath); err != nil {
			return err
		}
	}
	if *adminTokenFile != "" {
		if c.AdminToken, err = agent.ReadAdminToken(*adminTokenFile); err != nil {
			return err
		}
	}
	if *tenantGroups != "" {
		if c.TenantGroups, err = agent.ReadTenantGroups(*tenantGroups); err != nil {
			return err
		}
	}
	c.Started = func(a net.Addr) { slog.Info("rampart agent admin listening", "addr", a.String()) }
	a, err := agent.New(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err = a.Run(ctx)
	slog.Info("rampart agent exited", "ran", time.Since(start).Round(time.Millisecond).String())
	return err
}
