package lab

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

func init() { Register("failover", drillFailover) }

// FailoverSite is the site whose proxy the failover drill stops: a site of
// the two-site region, so its region stays healthy.
const FailoverSite = "eu2"

// drillFailover stops one site's proxy under client traffic (a retrying
// client for idempotent GETs) and follows it, twice: a planned stop
// (SIGTERM: /readyz turns 503 while the proxy still serves for its unready
// delay) and a crash (SIGKILL: the sockets close at once). Each time the
// agent sees /readyz fail and drains (65535:0 at the router, out of ECMP),
// then withdraws, and the client's requests move to the other sites. It
// reports each phase's error window and requests lost, starts the proxy
// again and waits until the site is back in the ECMP set.
func drillFailover(ctx context.Context, l *Lab, r *Report) error {
	site := FailoverSite
	if l.Site(site) == nil {
		site = l.Sites[0].Name
	}
	if err := l.WaitConverged(ctx, time.Minute); err != nil {
		return fmt.Errorf("the lab is not converged before the drill: %w", err)
	}
	var errs []error
	for _, ph := range []struct {
		name string
		stop func() error
	}{
		{"stop", func() error { return l.StopProxy(site) }},
		{"crash", func() error { return l.KillProxy(site) }},
	} {
		if err := failoverPhase(ctx, l, r, site, ph.name, ph.stop); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ph.name, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// failoverPhase is one stop of site's proxy under traffic, and its return.
func failoverPhase(ctx context.Context, l *Lab, r *Report, site, phase string, stop func() error) error {
	vip4 := l.VIPs[0]
	tr := l.StartTraffic(ctx, TrafficOptions{Rate: 100, Retries: 5})
	stopped := false
	defer func() {
		if !stopped {
			tr.Stop()
		}
	}()
	if err := waitAllServed(ctx, l, tr); err != nil {
		return err
	}
	r.Step("%s: traffic 100 requests/s from %d sources (v4 and v6), up to 5 retries on new connections (25 ms, doubling); every site serving",
		phase, len(l.Client.V4)+len(l.Client.V6))
	how := "SIGTERM"
	if phase == "crash" {
		how = "SIGKILL"
	}
	stopAt := time.Now()
	r.Step("%s: %s to the proxy of %s (pid %d)", phase, how, site, l.Proc("proxy/"+site).PID)
	exited := make(chan error, 1)
	go func() { exited <- stop() }()
	drainedAt, err := l.Router.WaitPath(ctx, vip4, site, PathDrained, 30*time.Second)
	if err != nil {
		return fmt.Errorf("no drain seen: %w", err)
	}
	r.Step("%s: router: %s's path for %s drained (graceful shutdown, out of ECMP)", phase, site, vip4)
	goneAt, err := l.Router.WaitPath(ctx, vip4, site, PathGone, 30*time.Second)
	if err != nil {
		return fmt.Errorf("no withdrawal seen: %w", err)
	}
	r.Step("%s: router: %s's path for %s withdrawn", phase, site, vip4)
	for _, v := range l.VIPs[1:] {
		if _, err := l.Router.WaitPath(ctx, v, site, PathGone, 30*time.Second); err != nil {
			return err
		}
	}
	if err := <-exited; err != nil {
		return fmt.Errorf("stop the proxy of %s: %w", site, err)
	}
	r.Step("%s: the proxy of %s is gone; %s withdrawn for every VIP", phase, site, site)
	select { // traffic after the withdrawal, to see it served elsewhere
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	res := tr.Stop()
	stopped = true
	r.Step("%s: traffic stopped: %d requests", phase, res.Requests())

	r.Figure(phase+": signal → drained at the router", drainedAt.Sub(stopAt))
	r.Figure(phase+": signal → withdrawn at the router", goneAt.Sub(stopAt))
	r.Figure(phase+": requests", res.Requests())
	r.Figure(phase+": failed attempts", res.FailedAttempts())
	r.Figure(phase+": requests retried", res.Retried())
	r.Figure(phase+": requests lost", res.Lost())
	r.Figure(phase+": error window", res.ErrorWindow())
	after := res.BySite(goneAt, time.Time{})
	r.Figure(phase+": served after the withdrawal, by site", fmtCounts(after))
	goal := "met"
	if res.ErrorWindow() > 2*time.Second || res.Lost() > 0 {
		goal = "MISSED"
	}
	r.Step("%s: goal (zero lost with a retrying client, error window ≤ 2s): %s", phase, goal)

	var errs []error
	if res.Lost() > 0 {
		errs = append(errs, fmt.Errorf("%d of %d requests lost (first: %s)", res.Lost(), res.Requests(), res.FirstError()))
	}
	if after[site] > 0 {
		errs = append(errs, fmt.Errorf("%s served %d requests started after its withdrawal", site, after[site]))
	}
	if len(after) == 0 {
		errs = append(errs, errors.New("no site served after the withdrawal"))
	}

	// Put the site back as it was.
	if err := l.StartProxy(ctx, site); err != nil {
		return errors.Join(append(errs, err)...)
	}
	r.Step("%s: proxy of %s started again and ready", phase, site)
	for _, v := range l.VIPs {
		if _, err := l.Router.WaitPath(ctx, v, site, PathServing, 60*time.Second); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	r.Step("%s: router: %s back in the ECMP set for every VIP", phase, site)
	return errors.Join(errs...)
}

// waitAllServed waits until every site has served a request of tr.
func waitAllServed(ctx context.Context, l *Lab, tr *Traffic) error {
	return waitFor(ctx, 60*time.Second, "every site serving client traffic", func() error {
		by := tr.Snapshot().BySite(time.Time{}, time.Time{})
		var missing []string
		for _, s := range l.Sites {
			if by[s.Name] == 0 {
				missing = append(missing, s.Name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not yet served by %v (so far %s)", missing, fmtCounts(by))
		}
		return nil
	})
}

// fmtCounts prints a map of counts sorted by key: "ap1=3 eu1=5".
func fmtCounts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
