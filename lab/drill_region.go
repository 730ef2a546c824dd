package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/lab/demo"
)

func init() { Register("region-down", drillRegionDown) }

// drillRegionDown stops every site of the demo tenants' primary region
// (eu): its sites withdraw at the router, the control plane flips the
// region unhealthy in the region state, the primary_backup tenant (globex)
// is served by its backup region (us) and the fixed tenant (acme) gets 503
// with a request id. Then the sites start again and the tenants return.
func drillRegionDown(ctx context.Context, l *Lab, r *Report) (err error) {
	region := demo.FixedPrimary
	var down []*Site
	for _, s := range l.Sites {
		if s.Region == region {
			down = append(down, s)
		}
	}
	if len(down) == 0 || len(down) == len(l.Sites) {
		return fmt.Errorf("region-down: region %s has %d of the lab's %d sites; it needs some, not all", region, len(down), len(l.Sites))
	}
	fixed, err := demo.Token(l.Control.DemoDir, demo.FixedTenant, 30*time.Minute)
	if err != nil {
		return err
	}
	backup, err := demo.Token(l.Control.DemoDir, demo.BackupTenant, 30*time.Minute)
	if err != nil {
		return err
	}
	read := "/v1/items/42"

	// Before: the region is healthy and both tenants are served in it.
	if err := waitFor(ctx, 60*time.Second, "region "+region+" healthy at the control plane", regionIs(ctx, l, region, true)); err != nil {
		return err
	}
	for _, tk := range []struct{ tenant, tok string }{{demo.FixedTenant, fixed}, {demo.BackupTenant, backup}} {
		if err := waitFor(ctx, 60*time.Second, tk.tenant+"'s read served in "+region, servedIn(ctx, l, tk.tok, read, region, 3)); err != nil {
			return err
		}
	}
	r.Step("before: region %s healthy; %s (fixed) and %s (primary_backup) reads served in %s", region, demo.FixedTenant, demo.BackupTenant, region)

	// Stop every site of the region; start them again whatever happens.
	stopped := []string{}
	defer func() {
		if len(stopped) == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, s := range stopped {
			if serr := l.StartSite(rctx, s); serr != nil {
				err = errors.Join(err, fmt.Errorf("restart site %s: %w", s, serr))
			}
		}
	}()
	ts := time.Now()
	for _, s := range down {
		stopped = append(stopped, s.Name)
		if err := l.StopSite(s.Name); err != nil {
			return fmt.Errorf("stop site %s: %w", s.Name, err)
		}
	}
	t0 := time.Now()
	r.Step("stopped every site of %s (%s) in %s: agents drained and closed their sessions, proxies and upstreams stopped",
		region, strings.Join(stopped, ", "), t0.Sub(ts).Round(time.Millisecond))

	// Watch the router, the control plane and both tenants until each
	// has shown what it should: the backup tenant served by its backup
	// and the fixed tenant refused by the regional decision ("no region
	// available", not an upstream error), each several times in a row
	// from different sources, so every remaining proxy has applied the
	// region state.
	var withdrawn, flipped, moved, failed time.Time
	var lastFail time.Time // the backup tenant's last failed read
	var why, reqID, refusal string
	var backupFails, backupTries, movedRun, failedRun int
	i := 0
	err = waitFor(ctx, 90*time.Second, "region "+region+" down seen everywhere", func() error {
		i++
		now := time.Now()
		if withdrawn.IsZero() {
			if ok, _ := sitesGone(l, stopped); ok {
				withdrawn = now
				r.Step("router: no path from %s for any VIP", strings.Join(stopped, ", "))
			}
		}
		if flipped.IsZero() {
			if h, err := regionHealth(ctx, l, region); err == nil && !h.Healthy {
				flipped, why = now, h.Why
				r.Step("control plane: region %s unhealthy (%s)", region, why)
			}
		}
		src := l.Client.Source(i)
		if moved.IsZero() {
			p := clientGet(ctx, l, src, read, backup)
			backupTries++
			if p.ok() && p.ans.Region == demo.BackupRegion {
				if movedRun++; movedRun == 6 {
					moved = time.Now()
					r.Step("%s's reads served in its backup region %s (6 in a row, last by site %s)", demo.BackupTenant, demo.BackupRegion, p.ans.Site)
				}
			} else {
				movedRun, lastFail = 0, time.Now()
				backupFails++
			}
		}
		if failed.IsZero() {
			p := clientGet(ctx, l, src, read, fixed)
			if p.status == http.StatusServiceUnavailable && p.requestID != "" && strings.Contains(p.body, "no region available") && strings.Contains(p.body, p.requestID) {
				if failedRun++; failedRun == 6 {
					failed, reqID, refusal = time.Now(), p.requestID, strings.TrimSpace(p.body)
					r.Step("%s's reads refused by the regional decision (6 in a row): %q (X-Request-Id %s)", demo.FixedTenant, refusal, reqID)
				}
			} else {
				failedRun = 0
			}
		}
		if withdrawn.IsZero() || flipped.IsZero() || moved.IsZero() || failed.IsZero() {
			return fmt.Errorf("withdrawn %v, flipped %v, %s moved %v, %s refused %v",
				!withdrawn.IsZero(), !flipped.IsZero(), demo.BackupTenant, !moved.IsZero(), demo.FixedTenant, !failed.IsZero())
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.Figure("first stop → no path of "+region+" at the router", withdrawn.Sub(ts))
	r.Figure("region down → unhealthy in the region state", flipped.Sub(t0))
	r.Figure("region down → "+demo.BackupTenant+" (primary_backup) reads served by its backup", moved.Sub(t0))
	r.Figure("region down → "+demo.BackupTenant+"'s last failed read", lastFail.Sub(t0))
	r.Figure(demo.BackupTenant+" reads failed before it moved", fmt.Sprintf("%d of %d", backupFails, backupTries))
	r.Figure("region down → "+demo.FixedTenant+" (fixed) reads refused by the regional decision", failed.Sub(t0))

	// Steady state while the region is down: the fixed tenant always
	// fails closed with a request id, the other is served by its backup,
	// a write waits for the writer, routes without a platform are served.
	const n = 12
	var served, closed int
	for j := range n {
		src := l.Client.Source(j)
		if p := clientGet(ctx, l, src, read, backup); p.ok() && p.ans.Region == demo.BackupRegion {
			served++
		}
		if p := clientGet(ctx, l, src, read, fixed); p.status == http.StatusServiceUnavailable && p.requestID != "" && strings.Contains(p.body, "no region available") {
			closed++
		}
	}
	r.Step("while %s is down: %s served by %s %d of %d, %s 503 with a request id %d of %d",
		region, demo.BackupTenant, demo.BackupRegion, served, n, demo.FixedTenant, closed, n)
	if served != n || closed != n {
		return fmt.Errorf("while %s is down: %s served by %s %d of %d, %s failed closed %d of %d (want all)",
			region, demo.BackupTenant, demo.BackupRegion, served, n, demo.FixedTenant, closed, n)
	}
	if p := clientDo(ctx, l, l.Client.Source(0), http.MethodPut, read, backup); p.status != http.StatusServiceUnavailable {
		return fmt.Errorf("%s's write with its primary (the writer %s) down: %s, want 503", demo.BackupTenant, demo.WriterRegion, p)
	}
	r.Step("%s's write: 503 (writes go to the platform's writer %s only; an operator switches it: rampart control writer set %s %s)",
		demo.BackupTenant, demo.WriterRegion, demo.Platform, demo.BackupRegion)
	if p := clientGet(ctx, l, l.Client.Source(1), "/whoami", ""); !p.ok() || p.ans.Region == region {
		return fmt.Errorf("GET /whoami with %s down: %s", region, p)
	}

	// Back: start the sites, wait for the router, the region and the
	// tenants (the returning primary ramps 50 % → 100 % over 5 s).
	t1 := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for len(stopped) > 0 {
		if err := l.StartSite(rctx, stopped[0]); err != nil {
			return fmt.Errorf("restart site %s: %w", stopped[0], err)
		}
		stopped = stopped[1:]
	}
	r.Step("started %s again", region)
	if err := l.WaitConverged(ctx, 2*time.Minute); err != nil {
		return err
	}
	r.Figure("every site serving every VIP after the restart", time.Since(t1))
	if err := waitFor(ctx, 60*time.Second, "region "+region+" healthy again", regionIs(ctx, l, region, true)); err != nil {
		return err
	}
	r.Figure("region healthy again after the restart", time.Since(t1))
	for _, tk := range []struct{ tenant, tok string }{{demo.FixedTenant, fixed}, {demo.BackupTenant, backup}} {
		if err := waitFor(ctx, 60*time.Second, tk.tenant+"'s read back in "+region, servedIn(ctx, l, tk.tok, read, region, 5)); err != nil {
			return err
		}
	}
	r.Figure("both tenants served in "+region+" again after the restart", time.Since(t1))
	return nil
}

// probe is one request from the client namespace and its answer.
type probe struct {
	status    int
	ans       Answer // the upstream's answer, when 2xx
	requestID string // the X-Request-Id header
	body      string
	err       error
}

func (p probe) ok() bool { return p.err == nil && p.status == http.StatusOK }

func (p probe) String() string {
	if p.err != nil {
		return p.err.Error()
	}
	return fmt.Sprintf("%d %s", p.status, strings.TrimSpace(p.body))
}

// clientGet GETs path on the VIP of src's family from src, with a bearer
// token when tok is not empty.
func clientGet(ctx context.Context, l *Lab, src, path, tok string) probe {
	return clientDo(ctx, l, src, http.MethodGet, path, tok)
}

// clientDo sends one request from src in the client namespace to the VIP
// of its family (a new connection: ECMP hashes it afresh). A PUT carries
// an Idempotency-Key.
func clientDo(ctx context.Context, l *Lab, src, method, path, tok string) probe {
	return do(ctx, l.Client.HTTP(src), method, URL(l.VIPFor(src), path), tok)
}

func do(ctx context.Context, hc *http.Client, method, url, tok string) probe {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return probe{err: err}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if method == http.MethodPut {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("lab-drill-%d", time.Now().UnixNano()))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return probe{err: fmt.Errorf("%s %s: %w", method, url, err)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	p := probe{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id"), body: string(b)}
	if resp.StatusCode/100 == 2 {
		_ = json.Unmarshal(b, &p.ans)
	}
	return p
}

// servedIn is a waitFor condition: n reads in a row (from different
// sources) are answered by an upstream of region.
func servedIn(ctx context.Context, l *Lab, tok, path, region string, n int) func() error {
	i := 0
	return func() error {
		for j := range n {
			i++
			p := clientGet(ctx, l, l.Client.Source(i), path, tok)
			if !p.ok() || p.ans.Region != region {
				return fmt.Errorf("read %d of %d in a row: %s", j+1, n, p)
			}
		}
		return nil
	}
}

// regionHealth is the control plane's view of one region.
func regionHealth(ctx context.Context, l *Lab, region string) (*regionView, error) {
	api, err := l.ControlAPI()
	if err != nil {
		return nil, err
	}
	rs, err := api.Regions(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, h := range rs.Regions {
		if h.Name == region {
			return &regionView{Healthy: h.Healthy, Why: h.Why}, nil
		}
	}
	return nil, fmt.Errorf("the control plane lists no region %s", region)
}

type regionView struct {
	Healthy bool
	Why     string
}

// regionIs is a waitFor condition: the control plane judges region so.
func regionIs(ctx context.Context, l *Lab, region string, healthy bool) func() error {
	return func() error {
		h, err := regionHealth(ctx, l, region)
		if err != nil {
			return err
		}
		if h.Healthy != healthy {
			return fmt.Errorf("region %s healthy=%v (%s)", region, h.Healthy, h.Why)
		}
		return nil
	}
}

// sitesGone says whether the router has no path from any of the sites for
// any VIP.
func sitesGone(l *Lab, sites []string) (bool, error) {
	for _, v := range l.VIPs {
		rs, err := vipRoutes(l, v)
		if err != nil {
			return false, err
		}
		for _, rt := range rs {
			if slices.Contains(sites, rt.Proto) {
				return false, nil
			}
		}
	}
	return true, nil
}
