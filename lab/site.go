package lab

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rampart-edge/rampart/lab/demo"
)

// anycastConfig is a site's anycast config: one eBGP session to the
// router, proxy_ready/xdp/region inputs sampled every 100 ms, a 1 s drain.
func (l *Lab) anycastConfig(s *Site) string {
	return fmt.Sprintf(`# site %[1]s (rampart lab up writes it)
local_as: %[2]d
router_id: %[3]s
site_id: %[4]d
next_hop_v4: %[3]s
next_hop_v6: %[5]s
shutdown_message: "rampart lab: site %[1]s stopping"
peers:
  - {address: %[6]s, as: %[7]d, local_address: %[3]s, hold_time_s: 3, keepalive_s: 1, connect_retry_s: 1}
sample_interval_ms: 100
drain: {time_ms: 1000, prepend: 2}
damping: {hold_down_ms: 300}
inputs:
  - {name: proxy_ready, kind: bool, global: true, rise: 2, fall: 1}
  - {name: xdp, kind: bool, global: true, rise: 1, fall: 2}
  - {name: region, kind: bool, global: true, rise: 2, fall: 2}
guard: {community_asn: 64512, min_sites: 1}
`, s.Name, routerAS+s.ID, s.Addr4, s.ID, s.Addr6, siteRouter4(s.ID), routerAS)
}

// startSite makes a site's files, bpffs and cgroup, enrols it at the
// control plane and starts its upstreams, proxy and agent.
func (l *Lab) startSite(ctx context.Context, s *Site) error {
	for _, d := range []string{"snapshots", "proxy", "agent"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			return fmt.Errorf("site %s: %w", s.Name, err)
		}
	}
	if err := l.mountBPF(filepath.Join(s.Dir, "bpf")); err != nil {
		return err
	}
	root, err := cgroupRoot()
	if err != nil {
		return err
	}
	base := filepath.Join(root, "rampart-lab-"+l.Prefix)
	if !slices.Contains(l.Cgroups, base) {
		if err := l.mkCgroup(base); err != nil {
			return err
		}
	}
	cg := filepath.Join(base, s.Name)
	if err := l.mkCgroup(cg); err != nil {
		return err
	}
	s.AgentTokenFile = filepath.Join(s.Dir, "agent-admin.token")
	if _, err := writeToken(s.AgentTokenFile); err != nil {
		return err
	}
	api, err := l.ControlAPI()
	if err != nil {
		return err
	}
	enrolled, err := api.Enroll(ctx, s.Name, nil)
	if err != nil {
		return fmt.Errorf("enrol site %s: %w", s.Name, err)
	}
	nodeToken := filepath.Join(s.Dir, "node.token")
	if err := os.WriteFile(nodeToken, []byte(enrolled.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", nodeToken, err)
	}
	anycastFile := filepath.Join(s.Dir, "anycast.yaml")
	if err := os.WriteFile(anycastFile, []byte(l.anycastConfig(s)), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", anycastFile, err)
	}
	for i, addr := range s.Upstreams {
		name := string(rune('a' + i))
		if err := l.startProc(&Proc{Name: "upstream/" + s.Name + "/" + name, Netns: s.Netns,
			Log:  filepath.Join(s.Dir, "upstream-"+name+".log"),
			Args: []string{l.Binary, "lab", "upstream", "-listen", addr, "-site", s.Name, "-region", s.Region, "-name", name}}); err != nil {
			return err
		}
	}
	snaps, handoff := filepath.Join(s.Dir, "snapshots"), filepath.Join(s.Dir, "handoff.sock")
	proxyState := filepath.Join(s.Dir, "proxy")
	proxyArgs := []string{l.Binary, "proxy", "-snapshot-dir", snaps, "-state-dir", proxyState,
		"-public-key", l.Control.PublicKey, "-admin", proxyAdmin, "-access-log", "off",
		"-handoff-socket", handoff, "-region", s.Region, "-region-state-max-age", demo.RegionStateMaxAge.String(), "-unready-delay", "1500ms", "-drain-timeout", "2s",
		"-control-url", l.Control.URL, "-control-token-file", nodeToken, "-node-id", s.Name, "-zone", s.Zone,
		"-agent-status-url", s.AgentAdmin}
	if s.Cohort != "" {
		proxyArgs = append(proxyArgs, "-cohort", s.Cohort)
	}
	if err := l.startProc(&Proc{Name: "proxy/" + s.Name, Netns: s.Netns, Cgroup: cg,
		Log: filepath.Join(s.Dir, "proxy.log"), Args: proxyArgs}); err != nil {
		return err
	}
	return l.startProc(&Proc{Name: "agent/" + s.Name, Netns: s.Netns, Log: filepath.Join(s.Dir, "agent.log"),
		Args: []string{l.Binary, "agent", "-interfaces", "eth0", "-xdp-mode", "driver",
			"-pin-root", filepath.Join(s.Dir, "bpf", "rampart"), "-cgroup", cg,
			"-snapshot-dir", snaps, "-state-dir", filepath.Join(s.Dir, "agent"),
			"-public-key", l.Control.PublicKey, "-deny-file", filepath.Join(proxyState, "deny.json"),
			"-handoff-socket", handoff, "-admin", agentAdmin, "-proxy-admin", proxyAdmin,
			"-anycast-config", anycastFile, "-region", s.Region, "-region-state-max-age", demo.RegionStateMaxAge.String(),
			"-region-state", filepath.Join(proxyState, "region-state.json"), "-site-name", s.Name,
			"-admin-token-file", s.AgentTokenFile,
			"-max-sources", "65536", "-max-conn-sources", "16384", "-max-vips", "256", "-max-sockets", "16"}})
}

// HTTP is an HTTP client whose connections are made inside the site's
// namespace (for its admin URLs and upstreams).
func (s *Site) HTTP() *http.Client { return HTTPClient(s.Netns, "", 5*time.Second) }

// WaitConverged waits until every site's agent is ready and the router has
// every site's undrained path for every VIP.
func (l *Lab) WaitConverged(ctx context.Context, timeout time.Duration) error {
	for _, s := range l.Sites {
		s := s
		hc := HTTPClient(s.Netns, "", 2*time.Second)
		if err := waitFor(ctx, timeout, "site "+s.Name+"'s agent /readyz", func() error {
			for _, n := range []string{"proxy/", "agent/"} {
				if p := l.Proc(n + s.Name); p != nil && !p.Alive() {
					return fmt.Errorf("%s%s exited: %s", n, s.Name, tail(p.Log, 2000))
				}
			}
			return expect200(hc, s.AgentAdmin+"/readyz")
		}); err != nil {
			return err
		}
	}
	for _, v := range l.VIPs {
		v := v
		if err := waitFor(ctx, timeout, "every site's path for "+v+" at the router", func() error {
			got, err := l.Router.Serving(v)
			if err != nil {
				return err
			}
			if len(got) != len(l.Sites) {
				return fmt.Errorf("serving %v, want all %d sites", got, len(l.Sites))
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
