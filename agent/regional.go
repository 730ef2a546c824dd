package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/l7/regionwatch"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// InputRegionServesTenants is the entry enforcement input (bool, polled at
// every sample): up while this node's region may serve at least one tenant
// of the active snapshot. "region_serves_tenants:GROUP" is the same over
// the tenants of one group of -tenant-groups: a VIP that needs it is
// withdrawn when no tenant of its group may be served here.
const InputRegionServesTenants = "region_serves_tenants"

// groupInput splits an input name into the region_serves_tenants family
// and its group ("" : every tenant).
func groupInput(name string) (group string, ok bool) {
	if name == InputRegionServesTenants {
		return "", true
	}
	g, ok := strings.CutPrefix(name, InputRegionServesTenants+":")
	return g, ok && g != ""
}

// MaxTenantGroupsBytes bounds a -tenant-groups file.
const MaxTenantGroupsBytes = 16 << 20

// ParseTenantGroups reads a -tenant-groups file: a YAML map of group name
// to the tenant ids (of the snapshot's tenants) whose traffic the VIPs of
// that group carry. Strict: unknown shapes, a second document, an empty
// group, a group name the anycast input name cannot carry, or a tenant
// listed twice in one group are errors.
func ParseTenantGroups(data []byte) (map[string][]string, error) {
	if len(data) > MaxTenantGroupsBytes {
		return nil, fmt.Errorf("tenant groups: %d bytes is over the %d limit", len(data), MaxTenantGroupsBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var groups map[string][]string
	if err := dec.Decode(&groups); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("tenant groups: empty file (write {} for none)")
		}
		return nil, fmt.Errorf("tenant groups: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("tenant groups: more than one YAML document")
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		ids := groups[name]
		if err := checkGroupName(name); err != nil {
			problems = append(problems, fmt.Sprintf("group %q: %v", name, err))
		}
		if len(ids) == 0 {
			problems = append(problems, fmt.Sprintf("group %q: no tenants", name))
		}
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		for i, id := range sorted {
			if id == "" {
				problems = append(problems, fmt.Sprintf("group %q: an empty tenant id", name))
			} else if i > 0 && sorted[i-1] == id {
				problems = append(problems, fmt.Sprintf("group %q: tenant %q listed twice", name, id))
			}
		}
		groups[name] = sorted
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("tenant groups: %s", strings.Join(problems, "; "))
	}
	if groups == nil {
		groups = map[string][]string{}
	}
	return groups, nil
}

// ReadTenantGroups reads and parses a -tenant-groups file.
func ReadTenantGroups(path string) (map[string][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenant groups: %w", err)
	}
	g, err := ParseTenantGroups(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// checkGroupName: the input name "region_serves_tenants:GROUP" must be a
// valid anycast input name (1-64 of A-Z a-z 0-9 _ . : -).
func checkGroupName(g string) error {
	if g == "" || len(InputRegionServesTenants)+1+len(g) > 64 {
		return fmt.Errorf("want 1-%d bytes", 64-len(InputRegionServesTenants)-1)
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return fmt.Errorf("byte %q is not one of A-Z a-z 0-9 _ . : -", c)
		}
	}
	return nil
}

// checkRegionInputs refuses an anycast config whose region_serves_tenants
// inputs cannot be fed: not of kind bool, no -region, or a group that
// -tenant-groups does not define.
func checkRegionInputs(ac *anycast.Config, region string, groups map[string][]string) error {
	var errs []error
	for _, in := range ac.Inputs {
		if in.Name == InputRegion && region == "" {
			errs = append(errs, fmt.Errorf("anycast input %s needs the agent's -region", in.Name))
		}
		g, ok := groupInput(in.Name)
		if !ok {
			continue
		}
		if in.Kind != anycast.KindBool {
			errs = append(errs, fmt.Errorf("anycast input %s must be of kind bool, not %s", in.Name, in.Kind))
		}
		if region == "" {
			errs = append(errs, fmt.Errorf("anycast input %s needs the agent's -region", in.Name))
		}
		if _, defined := groups[g]; g != "" && !defined {
			errs = append(errs, fmt.Errorf("anycast input %s names tenant group %q, which -tenant-groups does not define", in.Name, g))
		}
	}
	return errors.Join(errs...)
}

// eligible reports whether t may be served in region at all: fixed
// tenants only in their primary region, primary_backup ones in the primary
// or the backup, weighted ones in any allowed region.
func eligible(t *snapshot.Tenant, region string) bool {
	switch t.FailoverMode {
	case snapshot.FailoverPrimaryBackup:
		return t.PrimaryRegion == region || t.BackupRegion == region
	case snapshot.FailoverWeighted:
		return slices.Contains(t.AllowedRegions, region)
	default: // fixed, and the default
		return t.PrimaryRegion == region
	}
}

// tenantsServed counts the tenants (ids; nil: every tenant of the
// snapshot) that may be served in region by the snapshot's policy alone.
func tenantsServed(c *snapshot.Config, region string, ids []string) (served, listed int) {
	if ids == nil {
		for i := range c.Tenants {
			if eligible(&c.Tenants[i], region) {
				served++
			}
		}
		return served, len(c.Tenants)
	}
	for _, id := range ids {
		// Tenants are sorted by id (snapshot normalisation).
		i := sort.Search(len(c.Tenants), func(i int) bool { return c.Tenants[i].ID >= id })
		if i < len(c.Tenants) && c.Tenants[i].ID == id {
			listed++
			if eligible(&c.Tenants[i], region) {
				served++
			}
		}
	}
	return served, listed
}

// regionGuard feeds the region_serves_tenants inputs: the snapshot's
// tenants say whether the region may serve any of a group, and a fresh
// region-state document whether the region is healthy. A stale or absent
// document is not a reason to withdraw: the last verdict of a fresh one
// stays (none yet: healthy), and the detail says so.
type regionGuard struct {
	region string
	groups map[string][]string
	state  *regionwatch.Watcher // nil: no -region-state

	mu   sync.Mutex
	last *healthVerdict // from the last fresh document that listed the region
}

type healthVerdict struct {
	ok     bool
	detail string
}

// health is the region's verdict from the region state.
func (g *regionGuard) health() (bool, string) {
	if g.state == nil {
		return true, "no -region-state: region health not considered"
	}
	s, fresh := g.state.Current()
	var r struct {
		ok    bool
		found bool
	}
	var detail string
	if fresh {
		if reg, found := s.Region(g.region); found {
			r.found = true
			switch {
			case !reg.Healthy:
				detail = fmt.Sprintf("region %s unhealthy per region state %s", g.region, s.Version)
			case reg.Draining:
				detail = fmt.Sprintf("region %s draining per region state %s", g.region, s.Version)
			default:
				r.ok = true
				detail = fmt.Sprintf("region %s healthy per region state %s", g.region, s.Version)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.found {
		g.last = &healthVerdict{ok: r.ok, detail: detail}
		return r.ok, detail
	}
	why := "region state absent"
	switch {
	case fresh:
		why = fmt.Sprintf("region state %s does not list region %s", s.Version, g.region)
	case s != nil:
		why = fmt.Sprintf("region state %s is stale", s.Version)
	}
	if g.last == nil {
		return true, why + ": not a reason to withdraw (no earlier verdict)"
	}
	return g.last.ok, why + ": keeping the last verdict (" + g.last.detail + ")"
}

// decide is the value of input name for the active snapshot c.
func (g *regionGuard) decide(c *snapshot.Config, name string) (bool, string) {
	group, _ := groupInput(name)
	if c == nil {
		return false, "no active snapshot"
	}
	if !c.HasRegional() {
		return true, "the snapshot has no regional policy: every region serves"
	}
	var ids []string
	what := "tenants"
	if group != "" {
		ids = g.groups[group]
		what = fmt.Sprintf("tenants of group %s", group)
	}
	served, listed := tenantsServed(c, g.region, ids)
	if served == 0 {
		return false, fmt.Sprintf("region %s may serve none of the %d %s in the snapshot", g.region, listed, what)
	}
	ok, detail := g.health()
	return ok, fmt.Sprintf("region %s may serve %d of %d %s; %s", g.region, served, listed, what, detail)
}

// regionServes is the value of a region_serves_tenants input now.
func (a *Agent) regionServes(name string) (bool, string) {
	a.mu.Lock()
	act := a.active
	a.mu.Unlock()
	if act == nil {
		return false, "no active snapshot"
	}
	return a.rg.decide(act.snap.Config, name)
}
