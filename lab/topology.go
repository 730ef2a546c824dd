package lab

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The addresses (all from the documentation and ULA ranges):
//
//	client link   router 203.0.113.1/24, fd00:c::1/64; client 203.0.113.10-17, fd00:c::10-17
//	control link  router 198.51.100.241/28, fd00:ff::1/64; control 198.51.100.242, fd00:ff::2
//	site N link   router 198.51.100.(16N+1)/28, fd00:N::1/64; site 198.51.100.(16N+2), fd00:N::2
//	VIPs          the snapshot config's l4.vips (the skeleton config: 192.0.2.10, 2001:db8::10)
//
// The router is AS 65000; site N is AS 65000+N.
const (
	routerAS       = 65000
	clientSources  = 8
	controlAddr4   = "198.51.100.242"
	controlRouter4 = "198.51.100.241"
	controlPort    = 9080
	agentAdmin     = "127.0.0.1:9902"
	proxyAdmin     = "127.0.0.1:9901"
)

func siteAddr4(id uint32) string   { return fmt.Sprintf("198.51.100.%d", 16*id+2) }
func siteRouter4(id uint32) string { return fmt.Sprintf("198.51.100.%d", 16*id+1) }
func siteAddr6(id uint32) string   { return fmt.Sprintf("fd00:%d::2", id) }
func siteRouter6(id uint32) string { return fmt.Sprintf("fd00:%d::1", id) }

// run runs a command and returns an error naming it and its output.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nsName is the name under /run/netns of the lab's namespace for role.
func (l *Lab) nsName(role string) string { return l.Prefix + "-" + role }

func nsPath(name string) string { return "/run/netns/" + name }

// addNetns records and creates a namespace with lo up. A namespace of
// that name already there is another lab's (or a user's): refused, and not
// recorded, so this lab's Down leaves it alone.
func (l *Lab) addNetns(role string) (string, error) {
	name := l.nsName(role)
	if _, err := os.Stat(nsPath(name)); err == nil {
		return "", fmt.Errorf("namespace %s exists already: another lab runs with prefix %q (rampart lab down -dir ITS_DIR, or up -prefix OTHER)", name, l.Prefix)
	}
	l.Namespaces = append(l.Namespaces, name)
	if err := l.save(); err != nil {
		return "", err
	}
	if err := run("ip", "netns", "add", name); err != nil {
		return "", err
	}
	if err := run("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		return "", err
	}
	return nsPath(name), nil
}

// link joins the router namespace (interface rif) and another namespace
// (interface eth0) with a veth pair and addresses both ends.
func (l *Lab) link(other, rif string, router4, router6 string, prefix4, prefix6 int, addrs4, addrs6 []string) error {
	r := l.nsName("router")
	if err := run("ip", "link", "add", rif, "netns", r, "type", "veth", "peer", "name", "eth0", "netns", other); err != nil {
		return err
	}
	cmds := [][]string{
		{"ip", "-n", r, "addr", "add", fmt.Sprintf("%s/%d", router4, prefix4), "dev", rif},
		{"ip", "-n", r, "addr", "add", fmt.Sprintf("%s/%d", router6, prefix6), "dev", rif, "nodad"},
		{"ip", "-n", r, "link", "set", rif, "up"},
	}
	for _, a := range addrs4 {
		cmds = append(cmds, []string{"ip", "-n", other, "addr", "add", fmt.Sprintf("%s/%d", a, prefix4), "dev", "eth0"})
	}
	for _, a := range addrs6 {
		cmds = append(cmds, []string{"ip", "-n", other, "addr", "add", fmt.Sprintf("%s/%d", a, prefix6), "dev", "eth0", "nodad"})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", other, "link", "set", "eth0", "up"},
		[]string{"ip", "-n", other, "route", "add", "default", "via", router4},
		[]string{"ip", "-n", other, "-6", "route", "add", "default", "via", router6})
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return err
		}
	}
	return nil
}

// sysctl sets a sysctl inside a namespace (nsenter keeps /sys and /proc as
// they are; /proc/sys/net is the entered namespace's).
func sysctl(netns, key, value string) error {
	return run("nsenter", "--net="+netns, "--", "sysctl", "-q", "-w", key+"="+value)
}

// buildTopology makes the namespaces and links.
func (l *Lab) buildTopology() error {
	var err error
	if l.Router.Netns, err = l.addNetns("router"); err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"net.ipv4.ip_forward", "1"},
		{"net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv4.fib_multipath_hash_policy", "1"},
		{"net.ipv6.fib_multipath_hash_policy", "1"},
	} {
		if err := sysctl(l.Router.Netns, kv[0], kv[1]); err != nil {
			return err
		}
	}
	if l.Client.Netns, err = l.addNetns("client"); err != nil {
		return err
	}
	l.Client.V4, l.Client.V6 = nil, nil
	for i := 0; i < clientSources; i++ {
		l.Client.V4 = append(l.Client.V4, fmt.Sprintf("203.0.113.%d", 10+i))
		l.Client.V6 = append(l.Client.V6, fmt.Sprintf("fd00:c::%x", 0x10+i))
	}
	if err := l.link(l.nsName("client"), "client", "203.0.113.1", "fd00:c::1", 24, 64, l.Client.V4, l.Client.V6); err != nil {
		return err
	}
	if l.Control.Netns, err = l.addNetns("control"); err != nil {
		return err
	}
	if err := l.link(l.nsName("control"), "control", controlRouter4, "fd00:ff::1", 28, 64,
		[]string{controlAddr4}, []string{"fd00:ff::2"}); err != nil {
		return err
	}
	for _, s := range l.Sites {
		if s.Netns, err = l.addNetns(s.Name); err != nil {
			return err
		}
		if err := l.link(l.nsName(s.Name), s.Name, siteRouter4(s.ID), siteRouter6(s.ID), 28, 64,
			[]string{s.Addr4}, []string{s.Addr6}); err != nil {
			return err
		}
	}
	return l.save()
}
