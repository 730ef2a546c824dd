package region

// Input is one request as the decision sees it.
type Input struct {
	Tenant string // the verified identity's tenant ("" when none)
	Hint   string // the hint header's value ("" when absent)
	Local  int    // the proxy's own region index (Policy.Index), -1 when unknown
	Now    int64  // unix ns
	Roll   uint32 // a uniform random number: spreads weighted and ramping traffic
}

// Decision is the outcome of Decide. When Reason.OK(), Target is the
// region to pick endpoints in first and Candidates every region the request
// may go to (Target among them; for writes only the writer). Otherwise
// Target is -1, Candidates empty, and the request must fail closed.
type Decision struct {
	Reason     Reason
	Target     int
	Candidates Set
}

func (d *Decision) fail(r Reason) {
	d.Reason, d.Target, d.Candidates = r, -1, 0
}

// Decide decides one request of rule's route. It allocates nothing. The
// rule must come from the view's policy.
func (v *View) Decide(rule *Rule, in *Input, out *Decision) {
	p := v.p
	ti, ok := p.tenantIndex[in.Tenant]
	if !ok || in.Tenant == "" || rule.policy != p {
		out.fail(NoTenant)
		return
	}
	t := &p.tenants[ti]
	eligible := t.allowed & rule.regions
	if eligible == 0 {
		out.fail(RegionNotAllowed)
		return
	}
	if !v.fresh(in.Now) {
		out.fail(StateUnknown)
		return
	}
	if rule.write {
		v.decideWrite(rule, t, eligible, in, out)
	} else {
		v.decideRead(rule, t, eligible, in, out)
	}
	if out.Reason.OK() {
		v.applyHint(in, out)
	}
}

// fresh reports whether the view's state may be used at now: there is one,
// and its creation time is within region_state_max_age_ms of now (either
// way: a producer clock far ahead counts as stale too), or of the
// stricter bound the Live was given (SetMaxAge).
func (v *View) fresh(now int64) bool {
	return !v.state.IsZero() && now <= v.validUntil && now >= v.created-v.maxAge
}

// applyHint narrows the candidates to the hinted region when it is one of
// them; a hint naming anything else is ignored.
func (v *View) applyHint(in *Input, out *Decision) {
	if in.Hint == "" {
		return
	}
	h, ok := v.p.index[in.Hint]
	switch {
	case !ok || !out.Candidates.Has(int(h)):
		out.Reason = HintIgnored
	case out.Candidates.Len() > 1:
		out.Reason, out.Target, out.Candidates = HintNarrowed, int(h), bit(h)
	}
}

// regionOK checks the region-level signals of region i: healthy, not
// draining, serving a recent enough config.
func (v *View) regionOK(i int8) Reason {
	s := v.regions[i]
	switch {
	case !s.known || !s.healthy:
		return NoHealthyRegion
	case !s.configOK:
		return ConfigStale
	}
	return OKPrimary
}

// readOK checks region i for a read: the region signals, then the replica
// lag and the age of its observation.
func (v *View) readOK(rule *Rule, i int8, now int64) Reason {
	if r := v.regionOK(i); r != OKPrimary {
		return r
	}
	rep := v.replicas[rule.platform*len(v.p.regions)+int(i)]
	switch {
	case !rep.known:
		return LagUnknown
	case now-rep.observed > rule.maxAge:
		return SignalStale
	case rep.lagMs > rule.maxLagMs:
		return ReplicaLag
	}
	return OKPrimary
}

func (v *View) decideWrite(rule *Rule, t *tenant, eligible Set, in *Input, out *Decision) {
	w := v.writers[rule.platform]
	if w < 0 {
		out.fail(WriterUnknown)
		return
	}
	permitted := eligible
	switch t.mode {
	case modeFixed:
		permitted &= bit(t.primary)
	case modePrimaryBackup:
		permitted &= bit(t.primary) | bit(t.backup)
	}
	if !permitted.Has(int(w)) {
		out.fail(RegionNotAllowed)
		return
	}
	if w != t.primary && !v.p.platforms[rule.platform].cross {
		out.fail(CrossRegionWriteUnsafe)
		return
	}
	if r := v.regionOK(w); r != OKPrimary {
		out.fail(r)
		return
	}
	out.Reason, out.Target, out.Candidates = OKPrimary, int(w), bit(w)
	if w != t.primary {
		out.Reason = OKBackup
	}
}

func (v *View) decideRead(rule *Rule, t *tenant, eligible Set, in *Input, out *Decision) {
	primaryWhy := RegionNotAllowed
	if eligible.Has(int(t.primary)) {
		primaryWhy = v.readOK(rule, t.primary, in.Now)
	}
	switch t.mode {
	case modeFixed:
		if primaryWhy != OKPrimary {
			out.fail(primaryWhy)
			return
		}
		out.Reason, out.Target, out.Candidates = OKPrimary, int(t.primary), bit(t.primary)
	case modePrimaryBackup:
		backupOK := eligible.Has(int(t.backup)) && v.readOK(rule, t.backup, in.Now) == OKPrimary
		switch {
		case primaryWhy == OKPrimary && backupOK:
			// Both serve: the primary gets its recovery share, the backup the rest.
			out.Candidates = bit(t.primary) | bit(t.backup)
			if in.Roll%100 < v.p.share(v.rampStart[t.primary], in.Now) {
				out.Reason, out.Target = OKPrimary, int(t.primary)
			} else {
				out.Reason, out.Target = OKBackup, int(t.backup)
			}
		case primaryWhy == OKPrimary:
			out.Reason, out.Target, out.Candidates = OKPrimary, int(t.primary), bit(t.primary)
		case backupOK:
			out.Reason, out.Target, out.Candidates = OKBackup, int(t.backup), bit(t.backup)
		default:
			out.fail(primaryWhy)
		}
		if out.Reason == OKPrimary && out.Candidates.Len() > 1 && v.p.share(v.rampStart[t.primary], in.Now) == 100 {
			out.Candidates = bit(t.primary) // fully back: the backup is no longer a candidate
		}
	case modeWeighted:
		v.decideWeighted(rule, t, eligible, primaryWhy, in, out)
	}
}

func (v *View) decideWeighted(rule *Rule, t *tenant, eligible Set, primaryWhy Reason, in *Input, out *Decision) {
	var ok Set
	for i := range len(v.p.regions) {
		if eligible.Has(i) && (int8(i) == t.primary && primaryWhy == OKPrimary || int8(i) != t.primary && v.readOK(rule, int8(i), in.Now) == OKPrimary) {
			ok |= 1 << uint(i)
		}
	}
	if ok == 0 {
		out.fail(primaryWhy)
		return
	}
	out.Reason, out.Candidates = OKWeighted, ok
	if t.weights < 0 && ok.Has(in.Local) && v.p.share(v.rampStart[in.Local], in.Now) == 100 {
		out.Target = in.Local // no weights: proximity, the proxy's own region first
		return
	}
	var sum uint32
	for i := range len(v.p.regions) {
		if ok.Has(i) {
			sum += v.weight(t, i, in.Now)
		}
	}
	roll := in.Roll % sum
	for i := range len(v.p.regions) {
		if !ok.Has(i) {
			continue
		}
		w := v.weight(t, i, in.Now)
		if roll < w {
			out.Target = i
			return
		}
		roll -= w
	}
}

// weight is region i's effective weight for tenant t: its configured weight
// (1 without weights) scaled by its recovery share.
func (v *View) weight(t *tenant, i int, now int64) uint32 {
	w := uint32(1)
	if t.weights >= 0 {
		w = uint32(v.p.weights[int(t.weights)+i])
	}
	return w * v.p.share(v.rampStart[i], now)
}
