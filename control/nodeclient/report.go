package nodeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func (cl *Client) reportLoop(ctx context.Context) {
	t := time.NewTicker(cl.c.ReportInterval)
	defer t.Stop()
	for {
		cl.sendReport(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-cl.report:
		}
		cl.awaitSwap(ctx)
	}
}

// awaitSwap, after a hand-over, asks the proxy every SwapPoll until it
// runs the handed version (or a newer one) or refused it, for at most
// SwapWait, so the report that follows says what the proxy did, not what
// it had before.
func (cl *Client) awaitSwap(ctx context.Context) {
	cl.mu.Lock()
	v := cl.handed
	cl.handed = snapshot.Version{}
	cl.mu.Unlock()
	if v == (snapshot.Version{}) {
		return
	}
	deadline := time.Now().Add(cl.c.SwapWait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		o, err := cl.observe(ctx)
		if err == nil && (!o.Active.Less(v) || o.Refused == v) {
			return
		}
		t := time.NewTimer(cl.c.SwapPoll)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	cl.log.Warn("the proxy neither ran nor refused the snapshot handed over", "version", v.String(), "waited", cl.c.SwapWait.String())
}

// observe asks the proxy (or the Reporter) how it is doing.
func (cl *Client) observe(ctx context.Context) (Observation, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch {
	case cl.c.Reporter != nil:
		return cl.c.Reporter(ctx)
	case cl.c.AdminURL != "":
		return AdminObserver(cl.c.AdminURL, nil)(ctx)
	}
	return Observation{}, fmt.Errorf("no proxy to observe (neither AdminURL nor Reporter)")
}

// status builds the report from an observation: error rate and latency
// count from the moment the active version last changed, so they judge
// that version alone.
func (cl *Client) status(o Observation, oerr error) model.Status {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	st := &cl.st
	if oerr != nil {
		st.Ready = false
		st.QuotaDemand = nil // no figure: the control plane counts no demand here, not the last one
		st.LastError = clip("observe proxy: " + oerr.Error())
		return *st
	}
	if o.Refused != (snapshot.Version{}) && o.Refused != cl.proxyRefused {
		cl.proxyRefused = o.Refused
		st.Refused++
		st.RefusedVersion, st.RefusedReason = o.Refused, clip("proxy: "+o.RefusedReason)
		st.LastError = clip(fmt.Sprintf("proxy refused snapshot %s: %s", o.Refused, o.RefusedReason))
		cl.log.Warn("the proxy refused a snapshot", "version", o.Refused.String(), "reason", o.RefusedReason)
	}
	switch {
	case o.Active != st.Active: // a new version went active: count from here
		cl.base = o
	case o.Requests < cl.base.Requests || o.Errors < cl.base.Errors || o.LatencyCount < cl.base.LatencyCount:
		cl.base = Observation{Active: o.Active} // the proxy restarted: its counters did too
	}
	st.Active, st.Ready, st.Clusters = o.Active, o.Ready, o.Clusters
	st.QuotaDemand = cl.demand.rates(o.QuotaAttempts, time.Now())
	st.Requests = o.Requests - cl.base.Requests
	st.Errors = min(o.Errors-cl.base.Errors, st.Requests)
	st.ErrorRate, st.LatencyMs = 0, 0
	if st.Requests > 0 {
		st.ErrorRate = float64(st.Errors) / float64(st.Requests)
	}
	if n := o.LatencyCount - cl.base.LatencyCount; n > 0 {
		st.LatencyMs = (o.LatencySeconds - cl.base.LatencySeconds) / float64(n) * 1000
		st.LatencyMs = max(st.LatencyMs, 0)
	}
	return *st
}

// demandMeter turns the proxy's quota attempt counters into rates over
// the time between two reports, for the control plane's global quota
// leases.
type demandMeter struct {
	prev map[string]uint64
	at   time.Time
}

// rates returns each policy's attempts per second since the last call
// (sorted by policy; nil on the first call). A counter that went down
// (the proxy restarted) counts from 0.
func (m *demandMeter) rates(cur map[string]uint64, now time.Time) []model.QuotaDemand {
	prev, at := m.prev, m.at
	m.prev, m.at = cur, now
	dt := now.Sub(at).Seconds()
	if prev == nil || !(dt > 0) {
		return nil
	}
	out := make([]model.QuotaDemand, 0, len(cur))
	for p, n := range cur {
		if old := prev[p]; n >= old {
			n -= old
		}
		out = append(out, model.QuotaDemand{Policy: p, PerSecond: float64(n) / dt})
	}
	slices.SortFunc(out, func(a, b model.QuotaDemand) int { return strings.Compare(a.Policy, b.Policy) })
	return out
}

func (cl *Client) sendReport(ctx context.Context) {
	o, err := cl.observe(ctx)
	st := cl.status(o, err)
	if cl.c.AgentStatusURL != "" {
		ag, aerr := AgentStatus(ctx, cl.c.HTTPClient, cl.c.AgentStatusURL)
		st.Announcing, st.VIPs, st.Guard, st.AgentSeen = ag.Announcing, ag.VIPs, ag.Guard, aerr == nil
		if aerr != nil {
			cl.log.Debug("agent status", "err", aerr)
		}
	}
	body, _ := json.Marshal(st)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, cl.c.URL+"/v1/node/status", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+cl.c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.c.HTTPClient.Do(req)
	if ctx.Err() == nil {
		cl.contact("/v1/node/status", resp, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			cl.log.Debug("status report failed", "err", err)
		}
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent { // logged at WARN by contact when the state changes
		cl.log.Debug("status report refused", "status", resp.Status)
	}
}
