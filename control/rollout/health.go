package rollout

import (
	"fmt"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Verdicts of a health comparison.
const (
	VerdictOK      = "ok"
	VerdictNoData  = "no_data" // too few requests on the new version to judge
	VerdictWorse   = "worse"
	VerdictUnready = "unready"
)

type figures struct {
	nodes    int
	requests uint64
	errors   uint64
	latSum   float64 // latency_ms × requests
}

func (f *figures) add(n model.Node) {
	f.nodes++
	f.requests += n.Requests
	f.errors += n.Errors
	f.latSum += n.LatencyMs * float64(n.Requests)
}

func (f figures) rate() float64 {
	if f.requests == 0 {
		return 0
	}
	return float64(f.errors) / float64(f.requests)
}

func (f figures) latency() float64 {
	if f.requests == 0 {
		return 0
	}
	return f.latSum / float64(f.requests)
}

// Baseline is the error rate and mean latency of the live fleet, taken
// when a rollout starts: the reference when no node outside the rollout
// reports traffic (the last stage, or a small fleet).
func (p *Policy) Baseline(live []model.Node) (errRate, latencyMs float64) {
	var f figures
	for _, n := range live {
		f.add(n)
	}
	return f.rate(), f.latency()
}

// Evaluate compares the live nodes that run version v in stages up to
// open with the live nodes outside them (the rest of the fleet), or with
// the fleet's figures at the start (baseErr, baseLat) when those served
// fewer than MinRequests.
func (p *Policy) Evaluate(now time.Time, v snapshot.Version, open int, live []model.Node, baseErr, baseLat float64) model.Health {
	var on, ref figures
	h := model.Health{At: now}
	for _, n := range live {
		switch {
		case !p.Gets(n.Identity, open):
			ref.add(n)
		case n.Active == v:
			on.add(n)
			if !n.Ready {
				h.Unready = append(h.Unready, n.NodeID)
			}
		}
	}
	h.Nodes, h.Requests, h.ErrorRate, h.LatencyMs = on.nodes, on.requests, on.rate(), on.latency()
	h.Reference, h.RefNodes, h.RefRequests = "fleet", ref.nodes, ref.requests
	h.RefErrorRate, h.RefLatencyMs = ref.rate(), ref.latency()
	if ref.requests < p.Health.MinRequests || ref.requests == 0 {
		h.Reference, h.RefErrorRate, h.RefLatencyMs = "baseline", baseErr, baseLat
	}
	switch {
	case len(h.Unready) > 0:
		h.Verdict = VerdictUnready
		h.VerdictExplained = fmt.Sprintf("nodes %v on %s lost readiness", h.Unready, v)
	case on.nodes == 0 || on.requests == 0 || on.requests < p.Health.MinRequests:
		h.Verdict = VerdictNoData
		h.VerdictExplained = fmt.Sprintf("%d requests on %s, %d needed to judge", on.requests, v, p.Health.MinRequests)
	case h.ErrorRate > h.RefErrorRate+p.Health.MaxErrorRateIncrease:
		h.Verdict = VerdictWorse
		h.VerdictExplained = fmt.Sprintf("error rate %.4f on %s is above the %s's %.4f by more than %.4f",
			h.ErrorRate, v, h.Reference, h.RefErrorRate, p.Health.MaxErrorRateIncrease)
	case p.Health.MaxLatencyIncreaseMs > 0 && h.RefLatencyMs > 0 && h.LatencyMs > h.RefLatencyMs+p.Health.MaxLatencyIncreaseMs:
		h.Verdict = VerdictWorse
		h.VerdictExplained = fmt.Sprintf("mean latency %.1f ms on %s is above the %s's %.1f ms by more than %.1f ms",
			h.LatencyMs, v, h.Reference, h.RefLatencyMs, p.Health.MaxLatencyIncreaseMs)
	default:
		h.Verdict = VerdictOK
	}
	return h
}
