package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rampart-edge/rampart/lab/demo"
)

func init() { Register("control-down", drillControlDown) }

// controlDownFor is the least time the control plane stays down, with
// clients sending requests all along (node clients back off to 10 s).
const controlDownFor = 12 * time.Second

// drillControlDown stops the control plane while clients keep sending
// requests: traffic continues, a proxy restarted meanwhile serves its
// last-known-good snapshot, and when the control plane returns every node
// reconverges on what it publishes.
func drillControlDown(ctx context.Context, l *Lab, r *Report) (err error) {
	if len(l.Sites) < 2 {
		return fmt.Errorf("control-down: the lab has %d sites, it needs two", len(l.Sites))
	}
	tok, err := demo.Token(l.Control.DemoDir, demo.BackupTenant, 30*time.Minute)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 60*time.Second, "every node converged at the control plane", fleetConverged(ctx, l)); err != nil {
		return err
	}
	before := map[string]string{}
	for _, s := range l.Sites {
		st, err := proxyStatus(ctx, s)
		if err != nil {
			return err
		}
		before[s.Name] = st.ActiveVersion
	}
	r.Step("before: every node converged; proxies serve %v", before)

	// Two retrying clients through the VIPs: a route without a platform
	// and the primary_backup tenant's read (which needs the region state).
	loads := []*Traffic{
		l.StartTraffic(ctx, TrafficOptions{Rate: 20, Retries: 4, RetryDelay: 100 * time.Millisecond}),
		l.StartTraffic(ctx, TrafficOptions{Path: "/v1/items/7", Rate: 20, Retries: 4, RetryDelay: 100 * time.Millisecond,
			Header: http.Header{"Authorization": {"Bearer " + tok}}}),
	}
	defer func() {
		for _, ld := range loads {
			ld.Stop()
		}
	}()
	ctlDown := false
	defer func() {
		if !ctlDown {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if serr := l.StartControl(rctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("start the control plane again: %w", serr))
		}
	}()
	t0 := time.Now()
	ctlDown = true
	if err := l.StopControl(); err != nil {
		return fmt.Errorf("stop the control plane: %w", err)
	}
	r.Step("control plane stopped")
	if err := waitFor(ctx, 60*time.Second, "every node sees the control plane unreachable", func() error {
		for _, s := range l.Sites {
			st, err := proxyStatus(ctx, s)
			if err != nil {
				return err
			}
			if st.Control.State != "unreachable" {
				return fmt.Errorf("%s: control state %q", s.Name, st.Control.State)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	r.Step("every node reports the control plane unreachable (and keeps serving)")

	// A proxy restarted now can only serve what it kept on disk.
	s := l.Sites[len(l.Sites)-1]
	proxyDown := true
	defer func() {
		if !proxyDown {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if serr := l.StartProxy(rctx, s.Name); serr != nil {
			err = errors.Join(err, fmt.Errorf("start the proxy of %s again: %w", s.Name, serr))
		}
	}()
	if err := l.StopProxy(s.Name); err != nil {
		return err
	}
	if err := l.StartProxy(ctx, s.Name); err != nil {
		return err
	}
	proxyDown = false
	st, err := proxyStatus(ctx, s)
	if err != nil {
		return err
	}
	if st.ActiveVersion != before[s.Name] {
		return fmt.Errorf("the proxy of %s restarted without its control plane serves %s, want its last-known-good %s", s.Name, st.ActiveVersion, before[s.Name])
	}
	hc := s.HTTP()
	for _, path := range []string{"/whoami", "/v1/items/7"} {
		p := do(ctx, hc, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", demo.ListenPort, path), tok)
		if !p.ok() {
			return fmt.Errorf("the restarted proxy of %s: GET %s: %s", s.Name, path, p)
		}
	}
	r.Step("proxy of %s restarted with the control plane down: serves %s (its last-known-good), GET /whoami and %s's /v1/items/7 answer 200",
		s.Name, st.ActiveVersion, demo.BackupTenant)
	if err := l.WaitConverged(ctx, 2*time.Minute); err != nil {
		return err
	}
	r.Step("%s announces the VIPs again", s.Name)

	if left := controlDownFor - time.Since(t0); left > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(left):
		}
	}
	tDown := time.Now()
	var during TrafficResult
	for _, ld := range loads {
		for _, res := range ld.Snapshot().Results {
			if !res.Start.Before(t0) && res.Start.Before(tDown) {
				during.Results = append(during.Results, res)
			}
		}
	}
	r.Step("while the control plane was down: %d requests, %d retried, %d lost", during.Requests(), during.Retried(), during.Lost())

	// Back: every node reaches it and converges on what it publishes.
	t1 := time.Now()
	if err := l.StartControl(ctx); err != nil {
		return err
	}
	ctlDown = false
	r.Figure("control plane down", time.Since(t0))
	r.Step("control plane started again")
	if err := waitFor(ctx, 2*time.Minute, "every node reconverged", func() error {
		for _, s := range l.Sites {
			st, err := proxyStatus(ctx, s)
			if err != nil {
				return err
			}
			if st.Control.State != "ok" {
				return fmt.Errorf("%s: control state %q", s.Name, st.Control.State)
			}
		}
		return fleetConverged(ctx, l)()
	}); err != nil {
		return err
	}
	r.Figure("control plane back → every node reachable and converged", time.Since(t1))
	after := map[string]string{}
	for _, s := range l.Sites {
		st, err := proxyStatus(ctx, s)
		if err != nil {
			return err
		}
		after[s.Name] = st.ActiveVersion
	}
	r.Step("after: proxies serve %v", after)

	for i, name := range []string{"GET /whoami", "GET /v1/items/7 (" + demo.BackupTenant + ")"} {
		res := loads[i].Stop()
		r.Figure(name+": requests", res.Requests())
		r.Figure(name+": retried", res.Retried())
		r.Figure(name+": lost", res.Lost())
		if res.Lost() > 0 {
			return fmt.Errorf("%s: %d of %d requests lost with a retrying client (%s)", name, res.Lost(), res.Requests(), res.FirstError())
		}
	}
	if during.Requests() == 0 {
		return errors.New("no request was sent while the control plane was down")
	}
	return nil
}

// nodeStatus is the part of a proxy's admin /status a drill reads.
type nodeStatus struct {
	ActiveVersion string `json:"active_version"`
	Ready         bool   `json:"ready"`
	Control       struct {
		State     string `json:"state"`
		LastError string `json:"last_error"`
	} `json:"control"`
}

func proxyStatus(ctx context.Context, s *Site) (*nodeStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.ProxyAdmin+"/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.HTTP().Do(req)
	if err != nil {
		return nil, fmt.Errorf("the proxy of %s: %w", s.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the proxy of %s: /status: %s", s.Name, resp.Status)
	}
	var st nodeStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("the proxy of %s: /status: %w", s.Name, err)
	}
	return &st, nil
}

// fleetConverged is a waitFor condition: the control plane sees every
// site live, ready and converged on what it assigned.
func fleetConverged(ctx context.Context, l *Lab) func() error {
	return func() error {
		api, err := l.ControlAPI()
		if err != nil {
			return err
		}
		f, err := api.Fleet(ctx, nil)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, n := range f.Nodes {
			if !n.Live || !n.Converged || !n.Ready {
				return fmt.Errorf("node %s: live %v, converged %v, ready %v (active %s, assigned %s)", n.NodeID, n.Live, n.Converged, n.Ready, n.Active, n.Assigned)
			}
			seen[n.NodeID] = true
		}
		for _, s := range l.Sites {
			if !seen[s.Name] {
				return fmt.Errorf("node %s not in the fleet view", s.Name)
			}
		}
		return nil
	}
}
