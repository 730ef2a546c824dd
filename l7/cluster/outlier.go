package cluster

import "time"

// Report feeds one exchange's outcome to passive outlier detection: a run
// of 5xx answers, or of gateway errors (502, 503, 504, and failures to
// connect or to get an answer), ejects the endpoint for a while.
func (c *Cluster) Report(ep *Endpoint, status int, connFailed bool) {
	es := ep.state
	if !connFailed && status < 500 {
		if es.consec5xx.Load() != 0 {
			es.consec5xx.Store(0)
		}
		if es.consecGW.Load() != 0 {
			es.consecGW.Store(0)
		}
		return
	}
	o := c.Config.Outlier
	n5 := es.consec5xx.Add(1)
	var ng int32
	if connFailed || status == 502 || status == 503 || status == 504 {
		ng = es.consecGW.Add(1)
	}
	if (o.Consecutive5xx > 0 && int(n5) >= o.Consecutive5xx) ||
		(o.ConsecutiveGatewayErrors > 0 && int(ng) >= o.ConsecutiveGatewayErrors) {
		c.eject(ep)
	}
}

// eject takes the endpoint out of rotation for base_ejection_ms times the
// number of its ejections (at most max_ejection_ms), unless that would put
// more than max_ejection_percent of the cluster out at once (one endpoint
// may always be ejected). Ejections older than max_ejection_ms are forgotten.
func (c *Cluster) eject(ep *Endpoint) {
	es := ep.state
	es.consec5xx.Store(0)
	es.consecGW.Store(0)
	o := c.Config.Outlier
	now := time.Now()
	c.state.ejectMu.Lock()
	defer c.state.ejectMu.Unlock()
	ejected := 0
	for _, e := range c.endpoints {
		if e.state.ejectedAt.Load() > now.UnixNano() {
			ejected++
		}
	}
	limit := max(1, len(c.endpoints)*o.MaxEjectionPercent/100)
	if es.ejectedAt.Load() > now.UnixNano() || ejected >= limit {
		c.state.metrics.OutlierSkipped.WithLabelValues(c.Name).Inc()
		return
	}
	es.mu.Lock()
	maxD := time.Duration(o.MaxEjectionMs) * time.Millisecond
	if now.Sub(es.lastEject) > maxD+time.Duration(o.BaseEjectionMs)*time.Millisecond*time.Duration(es.ejections) {
		es.ejections = 0
	}
	es.ejections++
	d := min(time.Duration(o.BaseEjectionMs)*time.Millisecond*time.Duration(es.ejections), maxD)
	es.lastEject = now
	es.mu.Unlock()
	es.ejectedAt.Store(now.Add(d).UnixNano())
	c.state.metrics.OutlierEjections.WithLabelValues(c.Name).Inc()
	c.state.log.Warn("endpoint ejected", "cluster", c.Name, "endpoint", ep.Addr, "for", d.String())
}

// Ejection reports the endpoint's outlier record: how many times it has
// been ejected (since old ejections were last forgotten), when the latest
// ejection began, and when the current one ends (not after now: none).
func (ep *Endpoint) Ejection() (count int, last, until time.Time) {
	es := ep.state
	es.mu.Lock()
	count, last = es.ejections, es.lastEject
	es.mu.Unlock()
	return count, last, time.Unix(0, es.ejectedAt.Load()) // stored just after lastEject
}
