// Package birdtest runs a BIRD 2 router in the foreground for tests: one
// passive BGP session per speaker on loopback, low timers, ADD-PATH sends
// every path back, and a parser for `birdc show route all` and `show
// protocols all`.
package birdtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bird is the path of the bird binary (Debian package bird2).
const Bird = "/usr/sbin/bird"

// Peer is one speaker BIRD accepts a session from.
type Peer struct {
	Name    string // protocol name, e.g. "site1"
	Address string // the speaker's source address, e.g. 127.0.0.2
	AS      uint32
}

// Config is a router: AS 65000 on 127.0.0.1 by default.
type Config struct {
	AS       uint32 // default 65000
	Address  string // listen address, default 127.0.0.1
	Password string // TCP MD5 for every session; empty: none
	// BestPathOnly leaves ADD-PATH off (BIRD's default): each speaker is
	// sent only BIRD's best path, and none of the paths it sent itself.
	BestPathOnly bool
	Peers        []Peer
	// NextHopNets are routed to "lo" so that next hops in them resolve
	// (BIRD refuses 127.0.0.0/8 as a route). Default 198.51.100.0/24,
	// fd00::/8, 2001:db8::/32.
	NextHopNets []string
}

// Router is a running BIRD.
type Router struct {
	Port int    // BGP port BIRD listens on
	Sock string // control socket
	Dir  string
	Log  string // BIRD's log file
	cmd  *exec.Cmd
	done chan struct{}
}

// Need skips the test when bird is missing, or fails it when CI is set.
func Need(t testing.TB) {
	t.Helper()
	for _, b := range []string{Bird, "/usr/sbin/birdc"} {
		if _, err := os.Stat(b); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (Debian package bird2); CI must install it", b)
			}
			t.Skipf("%s is missing: install the Debian package bird2", b)
		}
	}
}

// FreePort returns a TCP port free on 127.0.0.1 right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start writes the config, starts `bird -f` and waits for its socket. The
// process is stopped when the test ends.
func Start(t testing.TB, c Config) *Router {
	t.Helper()
	Need(t)
	if c.AS == 0 {
		c.AS = 65000
	}
	if c.Address == "" {
		c.Address = "127.0.0.1"
	}
	if len(c.NextHopNets) == 0 {
		c.NextHopNets = []string{"198.51.100.0/24", "fd00::/8", "2001:db8::/32"}
	}
	dir, err := os.MkdirTemp("", "birdtest")
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{Port: FreePort(t), Dir: dir, Sock: filepath.Join(dir, "bird.ctl"),
		Log: filepath.Join(dir, "bird.log"), done: make(chan struct{})}
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(r.config(c)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "bird.out"))
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(Bird, "-f", "-c", conf, "-s", r.Sock)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start bird: %v", err)
	}
	go func() { _ = r.cmd.Wait(); out.Close(); close(r.done) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			b, _ := os.ReadFile(r.Log)
			t.Logf("bird log:\n%s", b)
		}
		os.RemoveAll(dir)
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := r.Birdc("show status"); err == nil {
			return r
		}
		select {
		case <-r.done:
			b, _ := os.ReadFile(filepath.Join(dir, "bird.out"))
			t.Fatalf("bird exited at start: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("bird did not open %s within 10s", r.Sock)
		}
	}
}

func (r *Router) config(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "log %q all;\nrouter id %s;\nprotocol device { scan time 10; }\n", r.Log, c.Address)
	for _, n := range c.NextHopNets {
		fam := "ipv4"
		if strings.Contains(n, ":") {
			fam = "ipv6"
		}
		fmt.Fprintf(&b, "protocol static { %s; route %s via \"lo\"; }\n", fam, n)
	}
	// multihop: BIRD does not take loopback neighbours as directly
	// connected. Low timers so that tests see changes within seconds.
	addPaths := " add paths tx;"
	if c.BestPathOnly {
		addPaths = ""
	}
	fmt.Fprintf(&b, `template bgp speaker {
  local %s port %d as %d;
  passive on; multihop;
  hold time 3; keepalive time 1; connect retry time 1; error wait time 1, 2;
  graceful restart off;
  ipv4 { import all; export where source = RTS_BGP;%[4]s next hop keep; };
  ipv6 { import all; export where source = RTS_BGP;%[4]s next hop keep; next hop address fd00::fffe; };
`, c.Address, r.Port, c.AS, addPaths)
	if c.Password != "" {
		fmt.Fprintf(&b, "  password %q;\n", c.Password)
	}
	b.WriteString("}\n")
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "protocol bgp %s from speaker { neighbor %s as %d; }\n", p.Name, p.Address, p.AS)
	}
	return b.String()
}

// Birdc runs one birdc command and returns its output.
func (r *Router) Birdc(args ...string) (string, error) {
	return Birdc(r.Sock, 5*time.Second, args...)
}

// Birdc runs one birdc command against the control socket sock, giving up
// after timeout, and returns its output (also on error).
func Birdc(sock string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "/usr/sbin/birdc", append([]string{"-s", sock}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Routes parses `show route all` (both tables).
func (r *Router) Routes() ([]Route, error) {
	out, err := r.Birdc("show", "route", "all")
	if err != nil {
		return nil, err
	}
	return ParseRoutes(out), nil
}

// Protocol returns `show protocols all NAME` parsed.
func (r *Router) Protocol(name string) (Protocol, error) {
	out, err := r.Birdc("show", "protocols", "all", name)
	if err != nil {
		return Protocol{}, err
	}
	return ParseProtocol(out), nil
}

// Wait polls f every 20 ms until it returns true or timeout passes, and
// returns how long it took.
func Wait(t testing.TB, timeout time.Duration, what string, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if f() {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
