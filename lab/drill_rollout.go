package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/control/cli"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/lab/demo"
)

func init() { Register("bad-rollout", drillBadRollout) }

// badPortShift moves every endpoint of the bad revision to a port nothing
// listens on: the canary's requests fail, so its health gate trips.
const badPortShift = 100

// drillBadRollout submits a revision that breaks health (the stable config
// with every upstream endpoint moved to a dead port) while clients send
// requests to the canary site and through the VIPs. The canary stage's
// health gate fails it, nothing of it reaches another stage, and the
// canary returns to the baseline's config under a new version.
func drillBadRollout(ctx context.Context, l *Lab, r *Report) (err error) {
	api, err := l.ControlAPI()
	if err != nil {
		return err
	}
	var canary *Site
	for _, s := range l.Sites {
		if s.Cohort == demo.CanaryCohort {
			canary = s
			break
		}
	}
	if canary == nil {
		return fmt.Errorf("bad-rollout: no site in cohort %q", demo.CanaryCohort)
	}
	if err := waitFor(ctx, 60*time.Second, "every node converged and no rollout open", func() error {
		if open, err := api.Rollouts(ctx, true, 10, nil); err != nil || len(open) > 0 {
			return fmt.Errorf("open rollouts %d (%v)", len(open), err)
		}
		return fleetConverged(ctx, l)()
	}); err != nil {
		return err
	}
	f, err := api.Fleet(ctx, nil)
	if err != nil {
		return err
	}
	baseline := f.Stable
	worst := 0.0
	for _, n := range f.Nodes {
		if n.Cohort != demo.CanaryCohort && n.ErrorRate > worst {
			worst = n.ErrorRate
		}
	}
	// The gate's reference counts from when each node's version went
	// active: failures earlier drills caused on purpose count too.
	r.Step("reference before the drill: the worst error rate of the nodes outside the canary %.4f (since their version went active)", worst)
	body, err := brokenConfig(ctx, api, baseline)
	if err != nil {
		return err
	}
	r.Step("baseline %s (version %s); the new revision moves every upstream endpoint %d ports up, where nothing listens", baseline, f.StableVersion, badPortShift)

	load := startCanaryLoad(ctx, l, canary)
	defer load.stop()
	watch := watchVersions(ctx, l)
	defer watch.stop()

	t0 := time.Now()
	rev, err := api.Submit(ctx, body, "application/json", "lab drill bad-rollout: endpoints on dead ports", "", nil)
	if err != nil {
		return fmt.Errorf("submit the bad revision: %w", err)
	}
	bad := rev.Version.String()
	r.Step("submitted %s (version %s)", rev.ID, bad)
	// Whatever happens, the bad revision does not stay in flight.
	defer func() {
		actx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cur, gerr := api.Rollout(actx, rev.ID, nil); gerr == nil && cur.Open() {
			if _, aerr := api.Steer(actx, rev.ID, "abort", "lab drill bad-rollout ended", nil); aerr != nil {
				err = errors.Join(err, fmt.Errorf("abort %s: %w", rev.ID, aerr))
			}
		}
	}()

	var ro *cli.Rollout
	seen := map[string]bool{}
	err = waitFor(ctx, 3*time.Minute, "rollout "+rev.ID+" ends", func() error {
		var err error
		if ro, err = api.Rollout(ctx, rev.ID, nil); err != nil {
			return err
		}
		for _, st := range ro.Stages {
			if !st.OpenedAt.IsZero() && !seen[st.Name+" opened"] {
				seen[st.Name+" opened"] = true
				r.Step("stage %s opened (nodes %s)", st.Name, strings.Join(st.Nodes, ", "))
			}
			if !st.ActiveAt.IsZero() && !seen[st.Name+" active"] {
				seen[st.Name+" active"] = true
				r.Step("stage %s: every node runs %s", st.Name, bad)
			}
		}
		if ro.Open() {
			return fmt.Errorf("state %s, stage %d, phase %s", ro.State, ro.Stage, ro.Phase)
		}
		return nil
	})
	if err != nil {
		return err
	}
	tEnd := time.Now()
	r.Step("rollout %s: %s: %s", rev.ID, ro.State, ro.Reason)
	if ro.State != model.StateFailed {
		return fmt.Errorf("the bad revision %s ended %s (%s), want failed by the canary's health gate", rev.ID, ro.State, ro.Reason)
	}
	if len(ro.Stages) != 1 || ro.Stages[0].Result != "failed" || !strings.Contains(ro.Reason, ro.Stages[0].Name) {
		return fmt.Errorf("the bad revision %s: stages %+v, reason %q: want only the canary stage, failed", rev.ID, ro.Stages, ro.Reason)
	}
	if ro.RolledBackTo == "" {
		return fmt.Errorf("the bad revision %s failed without a rollback revision", rev.ID)
	}
	st := ro.Stages[0]
	r.Figure("submit → canary stage opened", st.OpenedAt.Sub(t0))
	if !st.ActiveAt.IsZero() {
		r.Figure("submit → canary runs the bad version", st.ActiveAt.Sub(t0))
		r.Figure("canary runs it → health gate fails it", ro.UpdatedAt.Sub(st.ActiveAt))
	}
	r.Figure("submit → rollout failed", ro.UpdatedAt.Sub(t0))
	if h := st.Health; h != nil {
		b, _ := json.Marshal(h)
		r.Step("the gate's last comparison: %s", b)
	}

	// The canary returns to the baseline's config (a new version) and
	// serves again; no other node ever ran the bad version.
	back, err := api.Revision(ctx, ro.RolledBackTo, nil)
	if err != nil {
		return err
	}
	good := back.Version.String()
	if err := waitFor(ctx, 2*time.Minute, canary.Name+" back on "+good, func() error {
		s, err := proxyStatus(ctx, canary)
		if err != nil {
			return err
		}
		if s.ActiveVersion != good {
			return fmt.Errorf("%s serves %s", canary.Name, s.ActiveVersion)
		}
		p := do(ctx, canary.HTTP(), http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/whoami", demo.ListenPort), "")
		if !p.ok() {
			return fmt.Errorf("GET /whoami at %s: %s", canary.Name, p)
		}
		return nil
	}); err != nil {
		return err
	}
	r.Figure("rollout failed → canary serves the baseline again ("+ro.RolledBackTo+", "+good+")", time.Since(tEnd))
	if err := waitFor(ctx, 2*time.Minute, "every node converged on "+ro.RolledBackTo, fleetConverged(ctx, l)); err != nil {
		return err
	}
	r.Step("every node converged on %s (source %s)", ro.RolledBackTo, back.Source)
	ran := watch.stop()
	for site, versions := range ran {
		if site != canary.Name && versions[bad] {
			return fmt.Errorf("site %s ran the bad version %s outside the canary stage", site, bad)
		}
	}
	if !ran[canary.Name][bad] {
		r.Step("note: the canary's /status was never seen on %s (the gate may fail a version before the poll sees it)", bad)
	}
	c := load.stop()
	r.Figure("canary requests during the drill (ok / failed)", fmt.Sprintf("%d / %d", c.ok, c.failed))
	r.Step("no site but %s ran %s", canary.Name, bad)
	return nil
}

// brokenConfig is the stable revision's canonical config with every
// endpoint moved badPortShift ports up, as a JSON submission.
func brokenConfig(ctx context.Context, api *cli.Client, id string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.Server+"/v1/revisions/"+id+"?config=1", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+api.Token)
	resp, err := api.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("revision %s: %s: %s", id, resp.Status, b)
	}
	var d struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("revision %s: %w", id, err)
	}
	out, err := breakEndpoints(d.Config)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", id, err)
	}
	return out, nil
}

// breakEndpoints decodes a canonical config, moves every endpoint
// badPortShift ports up and encodes it again.
func breakEndpoints(canonical []byte) ([]byte, error) {
	var cfg snapshot.Config
	if err := json.Unmarshal(canonical, &cfg); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	moved := 0
	for i := range cfg.Clusters {
		for j := range cfg.Clusters[i].Endpoints {
			ep := &cfg.Clusters[i].Endpoints[j]
			ap, err := netip.ParseAddrPort(ep.Address)
			if err != nil || ap.Port() > 65535-badPortShift {
				return nil, fmt.Errorf("endpoint %q: not an address and port below %d (%v)", ep.Address, 65535-badPortShift, err)
			}
			ep.Address = netip.AddrPortFrom(ap.Addr(), ap.Port()+badPortShift).String()
			moved++
		}
	}
	if moved == 0 {
		return nil, fmt.Errorf("no endpoint to break")
	}
	return json.Marshal(&cfg)
}

// canaryLoad sends requests straight to the canary site's proxy (its
// listener in the site's namespace) and through the VIPs, so the gate has
// requests on the new version and on the reference.
type canaryLoad struct {
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	mu         sync.Mutex
	ok, failed int
}

func startCanaryLoad(ctx context.Context, l *Lab, canary *Site) *canaryLoad {
	ctx, cancel := context.WithCancel(ctx)
	c := &canaryLoad{cancel: cancel}
	direct := fmt.Sprintf("http://127.0.0.1:%d/whoami", demo.ListenPort)
	c.wg.Go(func() {
		hc := canary.HTTP()
		for ctx.Err() == nil {
			p := do(ctx, hc, http.MethodGet, direct, "")
			c.mu.Lock()
			if p.ok() {
				c.ok++
			} else if ctx.Err() == nil {
				c.failed++
			}
			c.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	c.wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			clientGet(ctx, l, l.Client.Source(i), "/whoami", "")
			time.Sleep(20 * time.Millisecond)
		}
	})
	return c
}

func (c *canaryLoad) stop() struct{ ok, failed int } {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return struct{ ok, failed int }{c.ok, c.failed}
}

// versionWatch polls every proxy's active version.
type versionWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	ran    map[string]map[string]bool // site → versions seen active
}

func watchVersions(ctx context.Context, l *Lab) *versionWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &versionWatch{cancel: cancel, done: make(chan struct{}), ran: map[string]map[string]bool{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for _, s := range l.Sites {
				st, err := proxyStatus(ctx, s)
				if err != nil {
					continue
				}
				w.mu.Lock()
				if w.ran[s.Name] == nil {
					w.ran[s.Name] = map[string]bool{}
				}
				w.ran[s.Name][st.ActiveVersion] = true
				w.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

func (w *versionWatch) stop() map[string]map[string]bool {
	w.once.Do(func() {
		w.cancel()
		<-w.done
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ran
}
