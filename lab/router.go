package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/anycast/birdtest"
)

// Route is one BGP path at the router (`birdc show route all`): one per
// announcing site, Best marks BIRD's choice; a drained path carries the
// graceful-shutdown community 65535:0 and a prepended AS path.
type Route = birdtest.Route

// birdConfig is the router: eBGP with every site (passive, the agents dial),
// hold 3 s, graceful restart off, ADD-PATH tx so each site's guard sees the
// others' paths; graceful shutdown (65535:0) lowers local preference to 0;
// the kernel protocols install ECMP (merge paths) into the router's FIB.
func (l *Lab) birdConfig() string {
	var b strings.Builder
	fmt.Fprintf(&b, `log %q all;
router id %s;
protocol device { scan time 10; }
protocol direct { ipv4; ipv6; }
protocol kernel { ipv4 { export where source = RTS_BGP; }; merge paths on limit 16; }
protocol kernel { ipv6 { export where source = RTS_BGP; }; merge paths on limit 16; }
filter from_site {
  if (65535, 0) ~ bgp_community then bgp_local_pref = 0;
  accept;
}
template bgp site {
  local as %d;
  passive on;
  hold time 3; keepalive time 1; connect retry time 1; error wait time 1, 2;
  graceful restart off;
  ipv4 { import filter from_site; export where source = RTS_BGP; add paths tx; next hop keep; };
  ipv6 { import filter from_site; export where source = RTS_BGP; add paths tx; next hop keep; };
}
`, l.Router.Log, controlRouter4, routerAS)
	for _, s := range l.Sites {
		fmt.Fprintf(&b, "protocol bgp %s from site { local %s; neighbor %s as %d; }\n",
			s.Name, siteRouter4(s.ID), s.Addr4, routerAS+s.ID)
	}
	return b.String()
}

// startRouter writes BIRD's config and starts it in the router namespace.
func (l *Lab) startRouter() error {
	dir := filepath.Join(l.Dir, "router")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("router dir: %w", err)
	}
	l.Router.Conf, l.Router.Sock, l.Router.Log = filepath.Join(dir, "bird.conf"), filepath.Join(dir, "bird.ctl"), filepath.Join(dir, "bird.log")
	if err := os.WriteFile(l.Router.Conf, []byte(l.birdConfig()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", l.Router.Conf, err)
	}
	p := &Proc{Name: "bird", Netns: l.Router.Netns, Log: filepath.Join(dir, "bird.out"),
		Args: []string{birdtest.Bird, "-f", "-c", l.Router.Conf, "-s", l.Router.Sock}}
	if err := l.startProc(p); err != nil {
		return err
	}
	return waitFor(context.Background(), 30*time.Second, "BIRD's control socket "+l.Router.Sock, func() error {
		if !p.Alive() {
			return fmt.Errorf("bird exited: %s", tail(p.Log, 2000))
		}
		_, err := l.Router.Birdc("show status")
		return err
	})
}

// Birdc runs one birdc command (e.g. "show route all") against the router.
func (r *Router) Birdc(args ...string) (string, error) {
	return birdtest.Birdc(r.Sock, 10*time.Second, args...)
}

// Routes returns the router's BGP paths for prefix (e.g. 192.0.2.10/32; a
// bare address means its /32 or /128).
func (r *Router) Routes(prefix string) ([]Route, error) {
	prefix = hostPrefix(prefix)
	out, err := r.Birdc("show", "route", "all", prefix)
	if err != nil {
		return nil, err
	}
	var rs []Route
	for _, rt := range birdtest.ParseRoutes(out) {
		if rt.Net == prefix {
			rs = append(rs, rt)
		}
	}
	return rs, nil
}

// Serving returns the sites whose paths for prefix are in the router's
// ECMP set: the best path's local preference and AS path length, not
// drained.
func (r *Router) Serving(prefix string) ([]string, error) {
	rs, err := r.Routes(prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rt := range rs {
		if !rt.Has("65535:0") && len(rt.ASPath) == 1 {
			out = append(out, rt.Proto)
		}
	}
	return out, nil
}

// KernelNexthops returns the router's kernel route for addr as `ip route`
// prints it: the ECMP next hops the FIB holds.
func (r *Router) KernelNexthops(addr string) (string, error) {
	fam := "-4"
	if strings.Contains(addr, ":") {
		fam = "-6"
	}
	out, err := exec.Command("nsenter", "--net="+r.Netns, "--", "ip", fam, "route", "show", hostPrefix(addr)).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip route show %s in the router: %w: %s", addr, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// hostPrefix turns an address into its host prefix; prefixes stay.
func hostPrefix(s string) string {
	if strings.Contains(s, "/") {
		return s
	}
	if strings.Contains(s, ":") {
		return s + "/128"
	}
	return s + "/32"
}

// PathState is what the router holds from one site for one prefix.
type PathState int

// Path states, as Router.PathOf tells them.
const (
	PathGone    PathState = iota // no path from the site (withdrawn, or never announced)
	PathDrained                  // a path with the graceful-shutdown community: out of the ECMP set
	PathUnequal                  // a path without it but with a longer AS path: not in the ECMP set
	PathServing                  // a path in the ECMP set
)

func (p PathState) String() string {
	return [...]string{"gone", "drained", "unequal", "serving"}[p]
}

// PathOf says what the router holds from site for prefix.
func (r *Router) PathOf(prefix, site string) (PathState, error) {
	rs, err := r.Routes(prefix)
	if err != nil {
		return PathGone, err
	}
	for _, rt := range rs {
		if rt.Proto != site {
			continue
		}
		switch {
		case rt.Has("65535:0"):
			return PathDrained, nil
		case len(rt.ASPath) != 1:
			return PathUnequal, nil
		default:
			return PathServing, nil
		}
	}
	return PathGone, nil
}

// WaitPath polls the router every 10 ms until site's path for prefix is in
// state want, and returns when it was first seen so.
func (r *Router) WaitPath(ctx context.Context, prefix, site string, want PathState, timeout time.Duration) (time.Time, error) {
	var seen time.Time
	err := waitForEvery(ctx, timeout, 10*time.Millisecond, fmt.Sprintf("%s's path for %s %s at the router", site, prefix, want), func() error {
		got, err := r.PathOf(prefix, site)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("it is %s", got)
		}
		seen = time.Now()
		return nil
	})
	return seen, err
}
