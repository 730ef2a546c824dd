package region

import (
	"sync"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// regionSig is what the region state says of one region, checked against
// the policy's snapshot version.
type regionSig struct {
	known    bool
	healthy  bool // healthy and not draining
	configOK bool
}

type replicaSig struct {
	known    bool
	lagMs    uint64
	observed int64 // unix ns
}

// View is a Policy under one region state: the signals by region index,
// ready for Decide. It is immutable; a new state or snapshot makes a new
// View.
type View struct {
	p          *Policy
	state      envelope.Version // zero: no state
	created    int64            // the state's creation, unix ns
	validUntil int64            // unix ns; past it every signal is unknown
	maxAge     int64            // ns: how old (or far ahead) the state may be
	regions    []regionSig
	writers    []int8       // by platform; -1: unknown
	replicas   []replicaSig // platform*len(regions) + region
	rampStart  []int64      // by region; 0: fully in service
}

// Policy is the policy the view decides with.
func (v *View) Policy() *Policy { return v.p }

// StateVersion is the region state's version (zero: none).
func (v *View) StateVersion() envelope.Version { return v.state }

// Share is region i's share of traffic (percent) at now under the recovery
// steps: below 100 while it ramps back after an absence.
func (v *View) Share(i int, now time.Time) int {
	if i < 0 || i >= len(v.rampStart) {
		return 0
	}
	return int(v.p.share(v.rampStart[i], now.UnixNano()))
}

// Tracker builds Views and remembers, by region name, when each region was
// last seen in service and when it came back, across region states and
// snapshots. Its clock is injectable for tests.
type Tracker struct {
	now     func() time.Time
	mu      sync.Mutex
	seen    bool // a fresh state was seen: later arrivals ramp up
	regions map[string]*track
}

type track struct {
	inService bool
	until     int64 // the state that said so is valid until
	rampStart int64
}

// NewTracker returns a Tracker; now nil means time.Now.
func NewTracker(now func() time.Time) *Tracker {
	if now == nil {
		now = time.Now
	}
	return &Tracker{now: now, regions: map[string]*track{}}
}

// View returns p under state s (nil: no state); see ViewWithin.
func (t *Tracker) View(p *Policy, s *regionstate.State) *View { return t.ViewWithin(p, s, 0) }

// ViewWithin returns p under state s (nil: no state), the state fresh while
// its age is within the policy's region_state_max_age_ms and, when
// maxAge > 0, within maxAge too. It records which regions
// are in service now. A region in service now that was not (unhealthy,
// draining, serving too old a config, absent, or its last state expired)
// starts its recovery ramp now. Regions in service in the first fresh
// state the tracker sees are fully in service.
func (t *Tracker) ViewWithin(p *Policy, s *regionstate.State, maxAge time.Duration) *View {
	now := t.now().UnixNano()
	v := &View{p: p, maxAge: p.stateMaxAge,
		regions:   make([]regionSig, len(p.regions)),
		writers:   make([]int8, len(p.platforms)),
		replicas:  make([]replicaSig, len(p.platforms)*len(p.regions)),
		rampStart: make([]int64, len(p.regions)),
	}
	for i := range v.writers {
		v.writers[i] = -1
	}
	fresh := false
	if s != nil {
		v.state, v.created = s.Version, s.Created.UnixNano()
		if maxAge > 0 && int64(maxAge) < v.maxAge {
			v.maxAge = int64(maxAge)
		}
		v.validUntil = v.created + v.maxAge
		fresh = v.fresh(now)
		v.fill(s)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, name := range p.regions {
		in := fresh && v.regions[i].healthy && v.regions[i].configOK
		tr := t.regions[name]
		if tr == nil {
			tr = &track{}
			t.regions[name] = tr
		}
		was := tr.inService && now <= tr.until
		switch {
		case in && !was && t.seen:
			tr.rampStart = now
		case in && !was:
			tr.rampStart = 0
		}
		tr.inService, tr.until = in, v.validUntil
		if in {
			v.rampStart[i] = tr.rampStart
		}
	}
	if fresh {
		t.seen = true
	}
	return v
}

func (v *View) fill(s *regionstate.State) {
	p := v.p
	for _, r := range s.Regions {
		i, ok := p.index[r.Name]
		if !ok {
			continue
		}
		v.regions[i] = regionSig{known: true, healthy: r.Healthy && !r.Draining, configOK: p.configFresh(r.ConfigVersion)}
	}
	for _, ps := range s.Platforms {
		pi, ok := p.platformIdx[ps.Name]
		if !ok {
			continue
		}
		if w, ok := p.index[ps.Writer]; ok {
			v.writers[pi] = w
		}
		for _, rep := range ps.Replicas {
			ri, ok := p.index[rep.Region]
			if !ok {
				continue
			}
			v.replicas[pi*len(p.regions)+int(ri)] = replicaSig{known: true, lagMs: rep.LagMs, observed: rep.ObservedAt.UnixNano()}
		}
	}
}

// configFresh reports whether a region serving snapshot version c is close
// enough to this policy's: not an older epoch, and at most maxConfigLag
// sequences behind in the same epoch. Newer is fine.
func (p *Policy) configFresh(c envelope.Version) bool {
	switch {
	case c.IsZero() || c.Epoch < p.version.Epoch:
		return false
	case c.Epoch > p.version.Epoch || c.Sequence >= p.version.Sequence:
		return true
	}
	return p.version.Sequence-c.Sequence <= p.maxConfigLag
}
