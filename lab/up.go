package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/cli"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/lab/demo"
	"golang.org/x/sys/unix"
)

// Options for Up.
type Options struct {
	Dir    string    // state directory; default DefaultStateDir
	Binary string    // the rampart binary the lab runs; default this executable
	Prefix string    // namespace name prefix; default "rl"
	Store  string    // control plane store: embedded (default) or postgres; default $LAB_STORE
	Out    io.Writer // progress and the "try this" text; default io.Discard
	// Config is the snapshot config submitted to the control plane;
	// default the demo config (lab/demo).
	Config []byte
}

// Up builds the lab: it first removes a lab left in the same directory
// (Down), then makes the namespaces, starts BIRD, the control plane (and
// submits the config), and every site, and returns once each site's agent
// is ready and the router has every site's path for every VIP.
func Up(ctx context.Context, o Options) (*Lab, error) {
	if o.Dir == "" {
		o.Dir = DefaultStateDir
	}
	if o.Prefix == "" {
		o.Prefix = "rl"
	}
	if o.Store == "" {
		o.Store = os.Getenv("LAB_STORE")
	}
	if o.Store == "" {
		o.Store = "embedded"
	}
	if o.Store != "embedded" && o.Store != "postgres" {
		return nil, fmt.Errorf("store %q: want embedded or postgres (LAB_STORE)", o.Store)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the rampart binary: %w", err)
		}
		o.Binary = exe
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", o.Dir, err)
	}
	if err := preflight(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
		fmt.Fprintf(o.Out, "lab: a lab is recorded in %s; removing it first\n", dir)
		if err := Down(dir); err != nil {
			return nil, fmt.Errorf("remove the previous lab: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	l := &Lab{Dir: dir, Binary: o.Binary, Prefix: o.Prefix, Store: o.Store, Created: time.Now().UTC()}
	if len(o.Config) > 0 {
		if err := l.setVIPs(o.Config); err != nil {
			return nil, err
		}
	}
	for _, s := range demo.Sites() {
		id := uint32(s.ID)
		site := &Site{Name: s.Name, Region: s.Region, Zone: s.Zone, Cohort: s.Cohort, ID: id,
			Dir: filepath.Join(dir, "sites", s.Name), Addr4: siteAddr4(id), Addr6: siteAddr6(id),
			AgentAdmin: "http://" + agentAdmin, ProxyAdmin: "http://" + proxyAdmin}
		for _, u := range s.Upstreams {
			site.Upstreams = append(site.Upstreams, u.String())
		}
		l.Sites = append(l.Sites, site)
	}
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "lab: %6.2fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	fail := func(err error) (*Lab, error) {
		return nil, fmt.Errorf("%w (the lab is left as it is for a look: logs in %s; rampart lab down -dir %s removes it)", err, dir, dir)
	}
	if err := l.save(); err != nil {
		return nil, err
	}
	if err := l.buildTopology(); err != nil {
		return fail(err)
	}
	step("namespaces and links made (%d)", len(l.Namespaces))
	if err := l.startRouter(); err != nil {
		return fail(err)
	}
	step("BIRD up in %s", l.Router.Netns)
	if err := l.startControlPlane(ctx, o.Config); err != nil {
		return fail(err)
	}
	step("control plane up at %s (%s store), config submitted", l.Control.URL, l.Store)
	for _, s := range l.Sites {
		if err := l.startSite(ctx, s); err != nil {
			return fail(err)
		}
	}
	step("sites started: %s", strings.Join(l.siteNames(), ", "))
	if err := l.platformSetup(ctx, true); err != nil {
		return fail(err)
	}
	step("platform %s: writer %s, replica lags pushed", demo.Platform, demo.WriterRegion)
	if err := l.mintTokens(); err != nil {
		return fail(err)
	}
	if err := l.WaitConverged(ctx, 3*time.Minute); err != nil {
		return fail(err)
	}
	step("every agent ready, every VIP announced by every site")
	return l, nil
}

func (l *Lab) siteNames() []string {
	var n []string
	for _, s := range l.Sites {
		n = append(n, s.Name)
	}
	return n
}

// preflight checks root and the tools the lab runs.
func preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root (network namespaces, XDP, bpffs mounts, cgroups)")
	}
	for _, t := range []struct{ path, pkg string }{
		{"/usr/sbin/bird", "bird2"}, {"/usr/sbin/birdc", "bird2"}, {"/usr/bin/nsenter", "util-linux"},
		{"/usr/sbin/ip", "iproute2"}, {"/usr/sbin/sysctl", "procps"},
	} {
		if _, err := os.Stat(t.path); err != nil {
			if _, err2 := os.Stat(strings.Replace(t.path, "/usr/sbin/", "/sbin/", 1)); err2 == nil {
				continue
			}
			return fmt.Errorf("%s is missing (Debian package %s; hack/deps.sh test installs it): %w", t.path, t.pkg, err)
		}
	}
	return nil
}

// startProc records p in the state and starts it.
func (l *Lab) startProc(p *Proc) error {
	l.Procs = append(l.Procs, p)
	if err := spawn(p); err != nil {
		return err
	}
	return l.save()
}

// Proc returns the lab's process of that name (e.g. "proxy/eu1"), or nil.
func (l *Lab) Proc(name string) *Proc {
	for _, p := range l.Procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// waitFor polls f every 50 ms until it returns nil, ctx ends or timeout
// passes; the error names what was awaited and f's last error.
func waitFor(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	return waitForEvery(ctx, timeout, 50*time.Millisecond, what, f)
}

func waitForEvery(ctx context.Context, timeout, every time.Duration, what string, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s: %w", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(every):
		}
	}
}

// startControlPlane writes the demo's files (lab/demo: keys, tokens, the
// control config, the snapshot config), starts the control plane in its
// namespace and submits the snapshot config (before any node is live, so
// the rollout skips its stages).
func (l *Lab) startControlPlane(ctx context.Context, config []byte) error {
	dir := filepath.Join(l.Dir, "control")
	c := &l.Control
	c.URL = fmt.Sprintf("http://%s:%d", controlAddr4, controlPort)
	var dsn string
	if l.Store == "postgres" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("control dir: %w", err)
		}
		var err error
		if dsn, err = l.startPostgres(dir); err != nil {
			return err
		}
	}
	p, err := demo.Write(dir, demo.Options{ControlListen: fmt.Sprintf("0.0.0.0:%d", controlPort), PostgresDSN: dsn})
	if err != nil {
		return err
	}
	c.DemoDir, c.Config, c.SigningKey, c.PublicKey = dir, p.Control, p.SnapshotKey, p.SnapshotPub
	c.AdminTokenFile, c.ReadTokenFile, c.MonitorTokenFile = p.AdminToken, p.ReadToken, p.MonitorToken
	if len(config) == 0 {
		if config, err = os.ReadFile(p.Snapshot); err != nil {
			return fmt.Errorf("the demo snapshot config: %w", err)
		}
	}
	if err := l.setVIPs(config); err != nil {
		return err
	}
	if err := l.save(); err != nil {
		return err
	}
	if err := l.startProc(&Proc{Name: "control", Netns: c.Netns, Log: filepath.Join(dir, "control.log"),
		Args: []string{l.Binary, "control", "-config", c.Config}}); err != nil {
		return err
	}
	if err := l.waitControl(ctx, 60*time.Second); err != nil {
		return err
	}
	api, err := l.ControlAPI()
	if err != nil {
		return err
	}
	if _, err := api.Submit(ctx, config, "application/yaml", "rampart lab", "", nil); err != nil {
		return fmt.Errorf("submit the lab's config: %w", err)
	}
	return nil
}

// setVIPs takes the VIPs from the snapshot config.
func (l *Lab) setVIPs(config []byte) error {
	cfg, err := snapshot.ParseYAML(config)
	if err != nil {
		return fmt.Errorf("the lab's snapshot config: %w", err)
	}
	l.VIPs = nil
	for _, v := range cfg.L4.VIPs {
		l.VIPs = append(l.VIPs, v.Address)
	}
	if len(l.VIPs) == 0 {
		return errors.New("the lab's snapshot config has no l4.vips: nothing to announce")
	}
	return nil
}

// platformSetup makes the demo platform's writer region eu (once r1 is
// stable; a writer already set is kept) and pushes every region's replica
// lag, which the control plane keeps in memory only: after every start.
func (l *Lab) platformSetup(ctx context.Context, writer bool) error {
	hc := HTTPClient(l.Control.Netns, "", 10*time.Second)
	base := fmt.Sprintf("http://127.0.0.1:%d/v1/platforms/%s/", controlPort, demo.Platform)
	post := func(tokenFile, path string, body []byte, ok ...int) error {
		tok, err := readToken(tokenFile)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		if resp.StatusCode/100 == 2 || slices.Contains(ok, resp.StatusCode) {
			return nil
		}
		return fmt.Errorf("POST %s: %s: %s", base+path, resp.Status, strings.TrimSpace(string(b)))
	}
	if writer {
		if err := waitFor(ctx, 60*time.Second, "the platform writer set", func() error {
			return post(l.Control.AdminTokenFile, "writer", demo.Writer(demo.WriterRegion, 0), http.StatusConflict)
		}); err != nil {
			return err
		}
	}
	regions := demo.Regions(demo.Sites())
	return waitFor(ctx, 60*time.Second, "the replica lags pushed", func() error {
		return post(l.Control.MonitorTokenFile, "lag", demo.Lags(regions, time.Now()))
	})
}

// waitControl waits until the control plane answers /healthz.
func (l *Lab) waitControl(ctx context.Context, timeout time.Duration) error {
	p := l.Proc("control")
	hc := HTTPClient(l.Control.Netns, "", 2*time.Second)
	return waitFor(ctx, timeout, "the control plane's /healthz", func() error {
		if p != nil && !p.Alive() {
			return fmt.Errorf("rampart control exited: %s", tail(p.Log, 2000))
		}
		return expect200(hc, fmt.Sprintf("http://127.0.0.1:%d/healthz", controlPort))
	})
}

// expect200 GETs url and wants a 200.
func expect200(hc *http.Client, url string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// writeToken makes an API token, writes it to path and returns its sha256.
func writeToken(path string) (string, error) {
	tok, sha, err := api.NewToken()
	if err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return sha, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token %s: %w", path, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Scan()
	return strings.TrimSpace(sc.Text()), nil
}

// ControlAPI is a typed client of the control plane (admin token), whose
// connections are made in the control namespace.
func (l *Lab) ControlAPI() (*cli.Client, error) {
	tok, err := readToken(l.Control.AdminTokenFile)
	if err != nil {
		return nil, err
	}
	return &cli.Client{Server: fmt.Sprintf("http://127.0.0.1:%d", controlPort), Token: tok,
		HTTP: HTTPClient(l.Control.Netns, "", 30*time.Second)}, nil
}

// cgroupRoot is the cgroup v2 mount point.
func cgroupRoot() (string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "", fmt.Errorf("read mounts: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "cgroup2" {
			return f[1], nil
		}
	}
	return "", errors.New("no cgroup2 mount (the agent's connection tracker needs one)")
}

// mountBPF records and mounts a private bpffs at dir.
func (l *Lab) mountBPF(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bpffs dir: %w", err)
	}
	l.Mounts = append(l.Mounts, dir)
	if err := l.save(); err != nil {
		return err
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs on %s: %w", dir, err)
	}
	return nil
}

// mkCgroup records and makes a cgroup directory; one already there is
// another lab's: refused and not recorded.
func (l *Lab) mkCgroup(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("cgroup %s exists already: another lab runs with prefix %q", dir, l.Prefix)
	}
	l.Cgroups = append([]string{dir}, l.Cgroups...) // children first
	if err := l.save(); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("make cgroup %s: %w", dir, err)
	}
	return nil
}

// mintTokens writes a JWT (read and write scopes, 24 h) for each demo
// tenant next to the demo's files, for the printed curl commands.
func (l *Lab) mintTokens() error {
	for _, t := range []string{demo.FixedTenant, demo.BackupTenant} {
		tok, err := demo.Token(l.Control.DemoDir, t, 24*time.Hour)
		if err != nil {
			return err
		}
		p := filepath.Join(l.Control.DemoDir, "jwt-"+t)
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}
