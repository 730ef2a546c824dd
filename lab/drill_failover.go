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
// client for idempotent GETs) and follows it: the agent sees /readyz fall
// and drains (65535:0 at the router, out of ECMP), then withdraws; the
// client's requests move to the other sites. It reports the error window
// and the requests lost, then starts the proxy again and waits until the
// site serves again.
func drillFailover(ctx context.Context, l *Lab, r *Report) error {
	site := FailoverSite
	if l.Site(site) == nil {
		site = l.Sites[0].Name
	}
	vip4 := l.VIPs[0]
	if err := l.WaitConverged(ctx, time.Minute); err != nil {
		return fmt.Errorf("the lab is not converged before the drill: %w", err)
	}
	tr := l.StartTraffic(ctx, TrafficOptions{Rate: 100, Retries: 3})
	stopped := false
	defer func() {
		if stopped {
			return
		}
		tr.Stop()
	}()
	if err := waitAllServed(ctx, l, tr); err != nil {
		return err
	}
	r.Step("traffic: 100 requests/s from %d sources (v4 and v6), up to 3 retries on a new connection; every site serving", len(l.Client.V4)+len(l.Client.V6))

	stopAt := time.Now()
	r.Step("SIGTERM to the proxy of %s (pid %d)", site, l.Proc("proxy/"+site).PID)
	exited := make(chan error, 1)
	go func() { exited <- l.StopProxy(site) }()
	drainedAt, err := l.Router.WaitPath(ctx, vip4, site, PathDrained, 30*time.Second)
	if err != nil {
		return fmt.Errorf("no drain seen: %w", err)
	}
	r.Step("router: %s's path for %s drained (graceful shutdown, out of ECMP)", site, vip4)
	goneAt, err := l.Router.WaitPath(ctx, vip4, site, PathGone, 30*time.Second)
	if err != nil {
		return fmt.Errorf("no withdrawal seen: %w", err)
	}
	r.Step("router: %s's path for %s withdrawn", site, vip4)
	for _, v := range l.VIPs[1:] {
		if _, err := l.Router.WaitPath(ctx, v, site, PathGone, 30*time.Second); err != nil {
			return err
		}
	}
	if err := <-exited; err != nil {
		return fmt.Errorf("stop the proxy of %s: %w", site, err)
	}
	r.Step("the proxy of %s exited; %s withdrawn for every VIP", site, site)
	time.Sleep(2 * time.Second) // traffic after the withdrawal, to see it served elsewhere
	res := tr.Stop()
	stopped = true
	r.Step("traffic stopped: %d requests", res.Requests())

	r.Figure("stop → drained at the router", drainedAt.Sub(stopAt))
	r.Figure("stop → withdrawn at the router", goneAt.Sub(stopAt))
	r.Figure("requests", res.Requests())
	r.Figure("failed attempts", res.FailedAttempts())
	r.Figure("requests retried", res.Retried())
	r.Figure("requests lost", res.Lost())
	r.Figure("error window", res.ErrorWindow())
	after := res.BySite(goneAt, time.Time{})
	r.Figure("served after the withdrawal, by site", fmtCounts(after))
	goal := "met"
	if res.ErrorWindow() > 2*time.Second || res.Lost() > 0 {
		goal = "MISSED"
	}
	r.Step("goal (zero lost with a retrying client, error window ≤ 2s): %s", goal)

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
	r.Step("proxy of %s started again and ready", site)
	for _, v := range l.VIPs {
		if _, err := l.Router.WaitPath(ctx, v, site, PathServing, 60*time.Second); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	r.Step("router: %s back in the ECMP set for every VIP", site)
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
