package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

func init() { Register("drain", drillDrain) }

// DrainSite is the site the drain drill drains.
const DrainSite = "ap1"

// drillDrain is an operator drain under client traffic: `rampart anycast
// drain` on one site's agent; the router sees the path drained (out of
// ECMP at once) and then withdrawn; no client request may fail while
// traffic leaves the site, and none starts there after the withdrawal.
// Then `rampart anycast undrain` and the site serves again.
//
// The client retries an idempotent GET once on a new connection: the
// router's ECMP is hash-threshold, so a change of the set (the drain, the
// return) moves some connections in flight to another site, which resets
// them. The drill counts those attempts apart ("attempts reset by the ECMP
// change") from requests that failed.
func drillDrain(ctx context.Context, l *Lab, r *Report) error {
	site := DrainSite
	if l.Site(site) == nil {
		site = l.Sites[len(l.Sites)-1].Name
	}
	vip4 := l.VIPs[0]
	if err := l.WaitConverged(ctx, time.Minute); err != nil {
		return fmt.Errorf("the lab is not converged before the drill: %w", err)
	}
	tr := l.StartTraffic(ctx, TrafficOptions{Rate: 100, Retries: 1})
	stopped := false
	defer func() {
		if !stopped {
			tr.Stop()
		}
	}()
	if err := waitAllServed(ctx, l, tr); err != nil {
		return err
	}
	r.Step("traffic: 100 requests/s from %d sources (v4 and v6), one retry on a new connection; every site serving", len(l.Client.V4)+len(l.Client.V6))
	drainAt := time.Now()
	out, err := l.Anycast(ctx, site, "drain", "-reason", "lab drill drain")
	if err != nil {
		return err
	}
	r.Step("rampart anycast drain on %s: %s", site, firstLine(out))
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
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	res := tr.Stop()
	stopped = true
	r.Step("traffic stopped: %d requests", res.Requests())
	during := res.BySite(drainAt, goneAt)
	after := res.BySite(goneAt, time.Time{})
	r.Figure("drain → drained at the router", drainedAt.Sub(drainAt))
	r.Figure("drain → withdrawn at the router", goneAt.Sub(drainAt))
	r.Figure("requests", res.Requests())
	r.Figure("attempts reset by the ECMP change", res.FailedAttempts())
	r.Figure("requests failed", res.Lost())
	r.Figure("served while draining, by site", fmtCounts(during))
	r.Figure("served after the withdrawal, by site", fmtCounts(after))

	var errs []error
	if res.Lost() > 0 {
		errs = append(errs, fmt.Errorf("%d of %d requests failed (first: %s)", res.Lost(), res.Requests(), res.FirstError()))
	}
	if after[site] > 0 {
		errs = append(errs, fmt.Errorf("%s served %d requests started after its withdrawal", site, after[site]))
	}
	if out, err := l.Anycast(ctx, site, "undrain"); err != nil {
		return errors.Join(append(errs, err)...)
	} else {
		r.Step("rampart anycast undrain on %s: %s", site, firstLine(out))
	}
	for _, v := range l.VIPs {
		if _, err := l.Router.WaitPath(ctx, v, site, PathServing, 60*time.Second); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	r.Step("router: %s back in the ECMP set for every VIP", site)
	return errors.Join(errs...)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
