package lab

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

func init() { Register("all-unhealthy", drillAllUnhealthy) }

// unhealthySettle is how long the drill watches the router once every
// site is unhealthy: several drains (1 s) and BGP hold times (3 s).
const unhealthySettle = 15 * time.Second

// drillAllUnhealthy makes every site unhealthy (stops every proxy, so
// each agent's proxy_ready input falls) and watches the router: the
// guard (min_sites 1) keeps at least one site's path for every VIP on
// the wire, held with the graceful-shutdown community, while the others
// withdraw. Then the proxies start again and every site announces.
func drillAllUnhealthy(ctx context.Context, l *Lab, r *Report) (err error) {
	if err := l.WaitConverged(ctx, 2*time.Minute); err != nil {
		return err
	}
	r.Step("before: every site serves every VIP")
	w := watchPaths(ctx, l)
	defer w.stop()

	var stopped []string
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, s := range stopped {
			if serr := l.StartProxy(rctx, s); serr != nil {
				err = errors.Join(err, fmt.Errorf("restart the proxy of %s: %w", s, serr))
			}
		}
	}()
	t0 := time.Now()
	for _, s := range l.Sites {
		stopped = append(stopped, s.Name)
		if err := l.StopProxy(s.Name); err != nil {
			return fmt.Errorf("stop the proxy of %s: %w", s.Name, err)
		}
		r.Step("stopped the proxy of %s", s.Name)
	}
	tAll := time.Now()
	r.Step("every proxy stopped: every site unhealthy (proxy_ready down)")

	// Watch until the paths settle: the guard holds the last sites.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(unhealthySettle):
	}
	v := w.stop()
	for _, vip := range l.VIPs {
		h := v[vip]
		r.Step("%s: fewest paths seen %d; at the end %s", vip, h.fewest, h.last)
		if h.fewest == 0 {
			return fmt.Errorf("%s: the router had no path at %s (%s after the first proxy stopped): the guard let every site withdraw",
				vip, h.emptyAt.Format(time.RFC3339Nano), h.emptyAt.Sub(t0).Round(time.Millisecond))
		}
		if len(h.lastPaths) == 0 {
			return fmt.Errorf("%s: no path at the end", vip)
		}
		for _, p := range h.lastPaths {
			if !p.drained {
				return fmt.Errorf("%s: site %s still announces without the graceful-shutdown community %s after every proxy stopped", vip, p.site, unhealthySettle)
			}
		}
		if len(h.lastPaths) == len(l.Sites) {
			return fmt.Errorf("%s: every site kept its path (%s): the guard held them all", vip, h.last)
		}
		r.Figure(vip+": sites the guard keeps", len(h.lastPaths))
	}
	r.Figure("all unhealthy → observed for", time.Since(tAll))

	// Back: start the proxies; every site announces again.
	t1 := time.Now()
	for len(stopped) > 0 {
		if err := l.StartProxy(ctx, stopped[0]); err != nil {
			return fmt.Errorf("restart the proxy of %s: %w", stopped[0], err)
		}
		stopped = stopped[1:]
	}
	if err := l.WaitConverged(ctx, 2*time.Minute); err != nil {
		return err
	}
	r.Figure("proxies started → every site serving every VIP", time.Since(t1))
	return nil
}

// pathWatch polls the router's paths for every VIP.
type pathWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	by     map[string]*vipHistory
}

type vipHistory struct {
	fewest    int
	emptyAt   time.Time
	last      string
	lastPaths []sitePath
}

type sitePath struct {
	site    string
	drained bool // carries 65535:0
}

func watchPaths(ctx context.Context, l *Lab) *pathWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &pathWatch{cancel: cancel, done: make(chan struct{}), by: map[string]*vipHistory{}}
	for _, v := range l.VIPs {
		w.by[v] = &vipHistory{fewest: len(l.Sites)}
	}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for _, v := range l.VIPs {
				rs, err := vipRoutes(l, v)
				if err != nil {
					continue
				}
				var ps []sitePath
				var txt []string
				for _, rt := range rs {
					p := sitePath{site: rt.Proto, drained: rt.Has("65535:0")}
					ps = append(ps, p)
					if p.drained {
						txt = append(txt, rt.Proto+" (held/draining)")
					} else {
						txt = append(txt, rt.Proto)
					}
				}
				sort.Strings(txt)
				w.mu.Lock()
				h := w.by[v]
				if len(ps) < h.fewest {
					h.fewest = len(ps)
				}
				if len(ps) == 0 && h.emptyAt.IsZero() {
					h.emptyAt = time.Now()
				}
				h.lastPaths, h.last = ps, "["+strings.Join(txt, ", ")+"]"
				w.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return w
}

func (w *pathWatch) stop() map[string]vipHistory {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]vipHistory{}
	for k, v := range w.by {
		out[k] = *v
	}
	return out
}

// vipRoutes is l.Router.Routes, with BIRD's "Network not found" (birdc
// exits 1) read as no path at all.
func vipRoutes(l *Lab, vip string) ([]Route, error) {
	rs, err := l.Router.Routes(vip)
	if err != nil && strings.Contains(err.Error(), "Network not found") {
		return nil, nil
	}
	return rs, err
}
