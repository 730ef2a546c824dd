package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Rampart runs the lab's rampart binary with args inside the namespace
// netns and returns its combined output.
func (l *Lab) Rampart(ctx context.Context, netns string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + netns, "--", l.Binary}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("rampart %s in %s: %w: %s", strings.Join(args, " "), netns, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// ControlCLI runs `rampart control ARGS` (the operator CLI) against the
// lab's control plane with the admin token, e.g. ControlCLI(ctx, "fleet").
func (l *Lab) ControlCLI(ctx context.Context, args ...string) (string, error) {
	tok, err := readToken(l.Control.AdminTokenFile)
	if err != nil {
		return "", err
	}
	return l.Rampart(ctx, l.Control.Netns,
		[]string{fmt.Sprintf("RAMPART_SERVER=http://127.0.0.1:%d", controlPort), "RAMPART_TOKEN=" + tok},
		append([]string{"control"}, args...)...)
}

// Anycast runs `rampart anycast ARGS -addr AGENT` in a site's namespace
// (status, drain, undrain; drain and undrain get the agent's admin token).
func (l *Lab) Anycast(ctx context.Context, site string, args ...string) (string, error) {
	s, err := l.site(site)
	if err != nil {
		return "", err
	}
	a := append([]string{"anycast"}, args...)
	a = append(a, "-addr", strings.TrimPrefix(s.AgentAdmin, "http://"))
	if len(args) > 0 && (args[0] == "drain" || args[0] == "undrain") {
		a = append(a, "-token-file", s.AgentTokenFile)
	}
	return l.Rampart(ctx, s.Netns, nil, a...)
}

// PrintHelp writes what to try in a running lab: commands a user can paste.
func (l *Lab) PrintHelp(w io.Writer) {
	self := l.Binary
	fmt.Fprintf(w, "\nrampart lab is up (state in %s/lab.json; logs next to it).\n\n", l.Dir)
	fmt.Fprintf(w, "  client  %s  sources %s … %s, %s … %s\n", l.Client.Netns, l.Client.V4[0], l.Client.V4[len(l.Client.V4)-1], l.Client.V6[0], l.Client.V6[len(l.Client.V6)-1])
	fmt.Fprintf(w, "  router  %s  BIRD (AS %d), birdc -s %s\n", l.Router.Netns, routerAS, l.Router.Sock)
	fmt.Fprintf(w, "  control %s  %s (%s store)\n", l.Control.Netns, l.Control.URL, l.Store)
	for _, s := range l.Sites {
		fmt.Fprintf(w, "  site %-4s %s  region %s zone %s, AS %d, %s / %s\n", s.Name, s.Netns, s.Region, s.Zone, routerAS+s.ID, s.Addr4, s.Addr6)
	}
	fmt.Fprintf(w, "  VIPs    %s\n\nTry (as root):\n", strings.Join(l.VIPs, ", "))
	c := "nsenter --net=" + l.Client.Netns + " --"
	for _, v := range l.VIPs {
		src := l.Client.V4[1]
		if strings.Contains(v, ":") {
			src = l.Client.V6[1]
		}
		fmt.Fprintf(w, "  %s curl -s --interface %s %s      # which site and upstream answered\n", c, src, URL(v, "/whoami"))
	}
	fmt.Fprintf(w, "  for i in $(seq 16); do %s curl -s %s; echo; done | grep -o '\"site\":\"[a-z0-9]*\"' | sort | uniq -c   # ECMP spreads connections\n", c, URL(l.VIPs[0], "/whoami"))
	if l.Control.DemoDir != "" {
		d := l.Control.DemoDir
		fmt.Fprintf(w, "  # the demo's tenants (lab/demo/README.md): a JWT read and write, an API-key read\n")
		fmt.Fprintf(w, "  %s curl -s -H \"Authorization: Bearer $(cat %s/jwt-globex)\" %s\n", c, d, URL(l.VIPs[0], "/v1/items/7"))
		fmt.Fprintf(w, "  %s curl -s -X PUT -H \"Authorization: Bearer $(cat %s/jwt-globex)\" -H 'Idempotency-Key: k1' %s\n", c, d, URL(l.VIPs[len(l.VIPs)-1], "/v1/items/7"))
		fmt.Fprintf(w, "  %s curl -s -H \"X-Api-Key: $(cat %s/api-key-acme)\" %s\n", c, d, URL(l.VIPs[0], "/v1/reports/1"))
	}
	fmt.Fprintf(w, "  birdc -s %s show route all %s\n", l.Router.Sock, hostPrefix(l.VIPs[0]))
	fmt.Fprintf(w, "  birdc -s %s show protocols\n", l.Router.Sock)
	fmt.Fprintf(w, "  nsenter --net=%s -- ip route show %s                 # the ECMP next hops\n", l.Router.Netns, hostPrefix(l.VIPs[0]))
	for _, s := range l.Sites {
		fmt.Fprintf(w, "  nsenter --net=%s -- %s anycast status -addr %s\n", s.Netns, self, agentAdmin)
	}
	fmt.Fprintf(w, "  RAMPART_TOKEN=$(cat %s) nsenter --net=%s -- %s control fleet\n", l.Control.AdminTokenFile, l.Control.Netns, self)
	fmt.Fprintf(w, "  RAMPART_TOKEN=$(cat %s) nsenter --net=%s -- %s control regions\n", l.Control.AdminTokenFile, l.Control.Netns, self)
	fmt.Fprintf(w, "  %s lab status -dir %s\n", self, l.Dir)
	fmt.Fprintf(w, "  %s lab drill -dir %s NAME      # drills: %s\n", self, l.Dir, strings.Join(Drills(), ", "))
	fmt.Fprintf(w, "  %s lab down -dir %s            # or make lab-down\n\n", self, l.Dir)
}

// Status writes each process's state and the router's view of each VIP.
func (l *Lab) Status(w io.Writer) {
	fmt.Fprintf(w, "lab %s (prefix %s, %s store, up since %s)\n", l.Dir, l.Prefix, l.Store, l.Created.Format("15:04:05"))
	for _, p := range l.Procs {
		state := "running"
		switch {
		case !p.Alive() && p.Stopped:
			state = "stopped (by a drill)"
		case !p.Alive():
			state = "NOT RUNNING"
		}
		fmt.Fprintf(w, "  %-20s pid %-8d %s\n", p.Name, p.PID, state)
	}
	for _, v := range l.VIPs {
		serving, err := l.Router.Serving(v)
		if err != nil {
			fmt.Fprintf(w, "  %s: %v\n", v, err)
			continue
		}
		fib, _ := l.Router.KernelNexthops(v)
		fmt.Fprintf(w, "  %s served by %v; router FIB: %s\n", v, serving, strings.ReplaceAll(fib, "\n", " "))
	}
}
