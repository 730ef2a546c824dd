package region

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Set is a set of regions of one Policy, a bit per region index.
type Set uint64

// Has reports whether region i is in s.
func (s Set) Has(i int) bool { return i >= 0 && i < 64 && s&(1<<uint(i)) != 0 }

// Len is the number of regions in s.
func (s Set) Len() int { return bits.OnesCount64(uint64(s)) }

func bit(i int8) Set {
	if i < 0 {
		return 0
	}
	return 1 << uint(i)
}

const (
	modeFixed uint8 = iota
	modePrimaryBackup
	modeWeighted
)

// tenant is one tenant's compiled record.
type tenant struct {
	allowed Set
	primary int8
	backup  int8  // -1: none
	mode    uint8 // modeFixed ...
	weights int32 // offset into Policy.weights (len(regions) entries), -1: none
}

type platform struct {
	name  string
	cross bool // all three guarantees: writes may leave the primary
}

// Rule is the compiled regional part of one route.
type Rule struct {
	policy   *Policy
	id       string
	write    bool
	platform int
	regions  Set // regions holding endpoints of the route's clusters
	maxLagMs uint64
	maxAge   int64 // ns
}

// ID is the route's id.
func (r *Rule) ID() string { return r.id }

// Write reports whether the route's request class is write.
func (r *Rule) Write() bool { return r.write }

// Policy is the regional policy of one snapshot, compiled for lookups that
// allocate nothing. It is immutable.
type Policy struct {
	version      envelope.Version // the snapshot's version
	regions      []string
	index        map[string]int8
	tenantIndex  map[string]int32
	tenants      []tenant
	weights      []uint16
	platforms    []platform
	platformIdx  map[string]int
	rules        map[string]*Rule
	hintHeader   string
	maxConfigLag uint64
	steps        []uint8
	stepNs       int64
	stateMaxAge  int64 // ns
}

// Compile builds the policy of a normalised, validated config. It returns
// nil (and no error) for a config without the regional policy. It is linear
// in the number of tenants.
func Compile(c *snapshot.Config) (*Policy, error) {
	if !c.HasRegional() {
		return nil, nil
	}
	if len(c.Regions) > snapshot.MaxRegions {
		return nil, fmt.Errorf("regional policy: %d regions, at most %d", len(c.Regions), snapshot.MaxRegions)
	}
	rp := c.Regional
	if rp == nil || rp.MaxConfigLag == nil {
		return nil, fmt.Errorf("regional policy: the config is not normalised (no regional defaults)")
	}
	p := &Policy{
		version:      envelope.Version{Epoch: c.Version.Epoch, Sequence: c.Version.Sequence},
		index:        make(map[string]int8, len(c.Regions)),
		tenantIndex:  make(map[string]int32, len(c.Tenants)),
		tenants:      make([]tenant, 0, len(c.Tenants)),
		platformIdx:  make(map[string]int, len(c.Platforms)),
		rules:        map[string]*Rule{},
		hintHeader:   rp.HintHeader,
		maxConfigLag: *rp.MaxConfigLag,
		stepNs:       int64(rp.RecoveryStepMs) * int64(time.Millisecond),
		stateMaxAge:  int64(rp.RegionStateMaxAgeMs) * int64(time.Millisecond),
	}
	for _, s := range rp.RecoverySteps {
		p.steps = append(p.steps, uint8(s))
	}
	for i, r := range c.Regions {
		p.regions = append(p.regions, r.Name)
		p.index[r.Name] = int8(i)
	}
	for _, t := range c.Tenants {
		rec, err := p.compileTenant(&t)
		if err != nil {
			return nil, err
		}
		p.tenantIndex[t.ID] = int32(len(p.tenants))
		p.tenants = append(p.tenants, rec)
	}
	for i, pl := range c.Platforms {
		p.platforms = append(p.platforms, platform{name: pl.Name, cross: pl.CrossRegionWrites()})
		p.platformIdx[pl.Name] = i
	}
	clusterRegions := map[string]Set{}
	for _, cl := range c.Clusters {
		var s Set
		for _, e := range cl.Endpoints {
			if i, ok := p.index[e.Region]; ok {
				s |= bit(i)
			}
		}
		clusterRegions[cl.Name] = s
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Platform == "" {
			continue
		}
		pi, ok := p.platformIdx[r.Platform]
		if !ok {
			return nil, fmt.Errorf("route %q: unknown platform %q", r.ID, r.Platform)
		}
		rule := &Rule{policy: p, id: r.ID, write: r.RequestClass == "write", platform: pi,
			regions:  clusterRegions[r.UpstreamCluster],
			maxLagMs: uint64(r.MaxReplicaLagMs), maxAge: int64(r.MaxSignalAgeMs) * int64(time.Millisecond)}
		for _, s := range r.TrafficSplit {
			rule.regions |= clusterRegions[s.Revision]
		}
		p.rules[r.ID] = rule
	}
	return p, nil
}

func (p *Policy) compileTenant(t *snapshot.Tenant) (tenant, error) {
	rec := tenant{primary: -1, backup: -1, weights: -1}
	var ok bool
	if rec.primary, ok = p.index[t.PrimaryRegion]; !ok {
		return rec, fmt.Errorf("tenant %q: unknown primary_region %q", t.ID, t.PrimaryRegion)
	}
	for _, r := range t.AllowedRegions {
		i, ok := p.index[r]
		if !ok {
			return rec, fmt.Errorf("tenant %q: unknown allowed region %q", t.ID, r)
		}
		rec.allowed |= bit(i)
	}
	switch t.FailoverMode {
	case snapshot.FailoverFixed:
		rec.mode = modeFixed
	case snapshot.FailoverPrimaryBackup:
		rec.mode = modePrimaryBackup
		if rec.backup, ok = p.index[t.BackupRegion]; !ok {
			return rec, fmt.Errorf("tenant %q: unknown backup_region %q", t.ID, t.BackupRegion)
		}
	case snapshot.FailoverWeighted:
		rec.mode = modeWeighted
	default:
		return rec, fmt.Errorf("tenant %q: unknown failover_mode %q", t.ID, t.FailoverMode)
	}
	if len(t.Weights) > 0 {
		rec.weights = int32(len(p.weights))
		for range p.regions {
			p.weights = append(p.weights, 0)
		}
		for r, w := range t.Weights {
			i, ok := p.index[r]
			if !ok || w < 1 || w > 10_000 {
				return rec, fmt.Errorf("tenant %q: weight %d of region %q", t.ID, w, r)
			}
			p.weights[int(rec.weights)+int(i)] = uint16(w)
		}
	}
	return rec, nil
}

// Rule returns the compiled rule of a route, or nil when the route has no
// platform (it is served without a regional decision).
func (p *Policy) Rule(routeID string) *Rule {
	if p == nil {
		return nil
	}
	return p.rules[routeID]
}

// Index returns the index of a region name, or -1.
func (p *Policy) Index(name string) int {
	if i, ok := p.index[name]; ok {
		return int(i)
	}
	return -1
}

// Name returns the name of region i ("" when out of range).
func (p *Policy) Name(i int) string {
	if i < 0 || i >= len(p.regions) {
		return ""
	}
	return p.regions[i]
}

// Regions returns the region names, by index.
func (p *Policy) Regions() []string { return p.regions }

// Version is the snapshot version the policy was compiled from.
func (p *Policy) Version() envelope.Version { return p.version }

// HintHeader is the request header that carries a client's region hint.
func (p *Policy) HintHeader() string { return p.hintHeader }

// Names writes the names of the regions in s, joined by sep, in index order.
func (p *Policy) Names(s Set, sep string) string {
	var b strings.Builder
	for i := range p.regions {
		if s.Has(i) {
			if b.Len() > 0 {
				b.WriteString(sep)
			}
			b.WriteString(p.regions[i])
		}
	}
	return b.String()
}

// share is the percentage of traffic a region that came back at start gets
// at now: the recovery steps, one per step interval; 100 once they are done
// (or when it never went away, start 0).
func (p *Policy) share(start, now int64) uint32 {
	if start == 0 || len(p.steps) == 0 || p.stepNs <= 0 {
		return 100
	}
	k := (now - start) / p.stepNs
	if k < 0 {
		k = 0
	}
	if k >= int64(len(p.steps)) {
		return 100
	}
	return uint32(p.steps[k])
}
