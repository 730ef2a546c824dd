package lab

import (
	"context"
	"fmt"
	"time"
)

// Process control for drills. Each Stop* ends the processes by PID
// (SIGTERM, then SIGKILL after a grace time) and marks them stopped in the
// state file; each Start* starts them again with the same arguments and
// waits until they are ready. A drill that stops something starts it again
// before it returns.

const stopGrace = 30 * time.Second

func (l *Lab) procOf(name string) (*Proc, error) {
	p := l.Proc(name)
	if p == nil {
		return nil, fmt.Errorf("the lab has no process %q", name)
	}
	return p, nil
}

func (l *Lab) stopProcs(names ...string) error {
	for _, n := range names {
		p, err := l.procOf(n)
		if err != nil {
			return err
		}
		p.Stopped = true
		if err := l.save(); err != nil {
			return err
		}
		if err := p.stop(stopGrace); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) startProcs(names ...string) error {
	for _, n := range names {
		p, err := l.procOf(n)
		if err != nil {
			return err
		}
		if p.Alive() {
			continue
		}
		if err := spawn(p); err != nil {
			return err
		}
		if err := l.save(); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) site(name string) (*Site, error) {
	s := l.Site(name)
	if s == nil {
		return nil, fmt.Errorf("the lab has no site %q (sites: %v)", name, l.siteNames())
	}
	return s, nil
}

// StopProxy stops a site's proxy (SIGTERM: /readyz turns 503 for the
// proxy's 1.5 s unready delay, then it drains for up to 2 s) and returns
// once it has exited.
func (l *Lab) StopProxy(site string) error {
	if _, err := l.site(site); err != nil {
		return err
	}
	return l.stopProcs("proxy/" + site)
}

// KillProxy kills a site's proxy with SIGKILL (a crash: no unready delay,
// no drain) and returns once it is gone.
func (l *Lab) KillProxy(site string) error {
	if _, err := l.site(site); err != nil {
		return err
	}
	p, err := l.procOf("proxy/" + site)
	if err != nil {
		return err
	}
	p.Stopped = true
	if err := l.save(); err != nil {
		return err
	}
	return p.kill()
}

// StartProxy starts a site's proxy again and waits for its /readyz.
func (l *Lab) StartProxy(ctx context.Context, site string) error {
	s, err := l.site(site)
	if err != nil {
		return err
	}
	if err := l.startProcs("proxy/" + site); err != nil {
		return err
	}
	return l.waitReady(ctx, s, "proxy", s.ProxyAdmin+"/readyz")
}

// StopSite stops everything of a site: its agent first (it drains and
// shuts its BGP session down), then the proxy and the upstreams.
func (l *Lab) StopSite(site string) error {
	if _, err := l.site(site); err != nil {
		return err
	}
	return l.stopProcs("agent/"+site, "proxy/"+site, "upstream/"+site+"/a", "upstream/"+site+"/b")
}

// StartSite starts a stopped site again and waits for its agent's /readyz.
func (l *Lab) StartSite(ctx context.Context, site string) error {
	s, err := l.site(site)
	if err != nil {
		return err
	}
	if err := l.startProcs("upstream/"+site+"/a", "upstream/"+site+"/b", "proxy/"+site, "agent/"+site); err != nil {
		return err
	}
	return l.waitReady(ctx, s, "agent", s.AgentAdmin+"/readyz")
}

// StopControl stops the control plane.
func (l *Lab) StopControl() error { return l.stopProcs("control") }

// StartControl starts the control plane again, waits for its /healthz and
// pushes the replica lags again (the control plane keeps them in memory).
func (l *Lab) StartControl(ctx context.Context) error {
	if err := l.startProcs("control"); err != nil {
		return err
	}
	if err := l.waitControl(ctx, 60*time.Second); err != nil {
		return err
	}
	return l.platformSetup(ctx, false)
}

func (l *Lab) waitReady(ctx context.Context, s *Site, what, url string) error {
	hc := HTTPClient(s.Netns, "", 2*time.Second)
	p := l.Proc(what + "/" + s.Name)
	return waitFor(ctx, 2*time.Minute, what+" of "+s.Name+" ready", func() error {
		if p != nil && !p.Alive() {
			return fmt.Errorf("%s exited: %s", p.Name, tail(p.Log, 2000))
		}
		return expect200(hc, url)
	})
}
