package snapshot

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MaxTenantIDBytes bounds a tenant id.
const MaxTenantIDBytes = 256

// validateRegional checks the regional policy: regions, platforms, tenants,
// the regional block and what routes ask of them. Every check is linear in
// the number of items (tenants may be tens of thousands).
func validateRegional(c *Config, p *problems) {
	regions := validateRegionDefs(c, p)
	platforms := validatePlatforms(c, regions, p)
	validateTenants(c.Tenants, regions, p)
	if rp := c.Regional; rp != nil {
		validateRegionalBlock(c, rp, p)
	}
	validateRegionalRoutes(c, platforms, p)
}

// validateRegionDefs checks the regions list and the endpoints' regions and
// zones against it; it returns the region names.
func validateRegionDefs(c *Config, p *problems) map[string]bool {
	names := map[string]bool{}
	if !c.HasRegional() {
		return names
	}
	if len(c.Regions) == 0 {
		p.add("regions: the regional policy (platforms, tenants, regional) needs the regions listed")
	}
	if len(c.Regions) > MaxRegions {
		p.add("regions: %d regions, at most %d", len(c.Regions), MaxRegions)
	}
	zoneOf := map[string]string{} // zone -> region
	zones := map[string]map[string]bool{}
	for i, r := range c.Regions {
		where := p.named("region", r.Name, i, names)
		if r.Name != "" && !validRegionName(r.Name) {
			p.add("%s: name must be 1 to 63 bytes of a-z, 0-9, - and _", where)
		}
		zs := map[string]bool{}
		for _, z := range r.Zones {
			switch other, dup := zoneOf[z]; {
			case z == "":
				p.add("%s: a zone name is empty", where)
			case dup && other == r.Name:
				p.add("%s: zone %q is listed twice", where, z)
			case dup:
				p.add("%s: zone %q is also in region %q", where, z, other)
			}
			zoneOf[z] = r.Name
			zs[z] = true
		}
		if _, ok := zones[r.Name]; !ok {
			zones[r.Name] = zs
		}
	}
	if len(c.Regions) == 0 {
		return names
	}
	for _, cl := range c.Clusters {
		for _, e := range cl.Endpoints {
			switch {
			case e.Region == "":
			case !names[e.Region]:
				p.add("cluster %q: endpoint %s names unknown region %q", cl.Name, e.Address, e.Region)
			case e.Zone != "" && len(zones[e.Region]) > 0 && !zones[e.Region][e.Zone]:
				p.add("cluster %q: endpoint %s: zone %q is not a zone of region %q", cl.Name, e.Address, e.Zone, e.Region)
			}
		}
	}
	return names
}

func validRegionName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func validatePlatforms(c *Config, regions map[string]bool, p *problems) map[string]*Platform {
	clusters := map[string]bool{}
	for _, cl := range c.Clusters {
		clusters[cl.Name] = true
	}
	names := map[string]bool{}
	byName := map[string]*Platform{}
	owner := map[string]string{} // cluster -> platform
	for i := range c.Platforms {
		pl := &c.Platforms[i]
		where := p.named("platform", pl.Name, i, names)
		byName[pl.Name] = pl
		if len(pl.Clusters) == 0 {
			p.add("%s: clusters needs at least one cluster", where)
		}
		for _, cl := range pl.Clusters {
			switch other, dup := owner[cl]; {
			case !clusters[cl]:
				p.add("%s: unknown cluster %q", where, cl)
			case dup && other == pl.Name:
				p.add("%s: cluster %q is listed twice", where, cl)
			case dup:
				p.add("%s: cluster %q is also in platform %q (a cluster shares one database)", where, cl, other)
			}
			owner[cl] = pl.Name
		}
		if len(pl.ReplicaRegions) == 0 {
			p.add("%s: replica_regions needs at least one region", where)
		}
		seen := map[string]bool{}
		for _, r := range pl.ReplicaRegions {
			if !regions[r] {
				p.add("%s: replica_regions names unknown region %q", where, r)
			} else if seen[r] {
				p.add("%s: replica_regions lists %q twice", where, r)
			}
			seen[r] = true
		}
	}
	return byName
}

// validateTenants checks each tenant in constant time per listed region,
// formatting a tenant's name only when it has a problem.
func validateTenants(ts []Tenant, regions map[string]bool, p *problems) {
	ids := make(map[string]struct{}, len(ts))
	for i := range ts {
		t := &ts[i]
		where := func() string {
			if t.ID == "" {
				return fmt.Sprintf("tenant #%d", i+1)
			}
			return fmt.Sprintf("tenant %q", t.ID)
		}
		switch _, dup := ids[t.ID]; {
		case t.ID == "":
			p.add("%s: id is missing", where())
		case dup:
			p.add("%s: duplicate id", where())
		case len(t.ID) > MaxTenantIDBytes || strings.ContainsFunc(t.ID, func(r rune) bool { return r < ' ' || r == 0x7f }):
			p.add("%s: id must be 1 to %d bytes without control bytes", where(), MaxTenantIDBytes)
		}
		ids[t.ID] = struct{}{}
		allowed := make(map[string]bool, len(t.AllowedRegions))
		for _, r := range t.AllowedRegions {
			if !regions[r] {
				p.add("%s: allowed_regions names unknown region %q", where(), r)
			} else if allowed[r] {
				p.add("%s: allowed_regions lists %q twice", where(), r)
			}
			allowed[r] = true
		}
		switch {
		case t.PrimaryRegion == "":
			p.add("%s: primary_region is missing", where())
		case !regions[t.PrimaryRegion]:
			p.add("%s: primary_region %q is not a known region", where(), t.PrimaryRegion)
		case !allowed[t.PrimaryRegion]:
			p.add("%s: primary_region %q is not in allowed_regions", where(), t.PrimaryRegion)
		}
		validateFailover(p, where, t, regions, allowed)
	}
}

func validateFailover(p *problems, where func() string, t *Tenant, regions, allowed map[string]bool) {
	switch t.FailoverMode {
	case FailoverFixed, FailoverWeighted:
		if t.BackupRegion != "" {
			p.add("%s: backup_region needs failover_mode primary_backup (it is %s)", where(), t.FailoverMode)
		}
	case FailoverPrimaryBackup:
		switch {
		case t.BackupRegion == "":
			p.add("%s: failover_mode primary_backup needs a backup_region", where())
		case !regions[t.BackupRegion]:
			p.add("%s: backup_region %q is not a known region", where(), t.BackupRegion)
		case t.BackupRegion == t.PrimaryRegion:
			p.add("%s: backup_region %q is the primary region", where(), t.BackupRegion)
		case !allowed[t.BackupRegion]:
			p.add("%s: backup_region %q is not in allowed_regions", where(), t.BackupRegion)
		}
	default:
		p.add("%s: failover_mode %q must be fixed, primary_backup or weighted", where(), t.FailoverMode)
	}
	if t.FailoverMode == FailoverWeighted && !t.WeightedOptIn {
		p.add("%s: failover_mode weighted needs weighted_opt_in: true (the tenant opts in to reads served by weight)", where())
	}
	if len(t.Weights) == 0 {
		return
	}
	if t.FailoverMode != FailoverWeighted {
		p.add("%s: weights need failover_mode weighted (it is %s)", where(), t.FailoverMode)
		return
	}
	for _, r := range slices.Sorted(maps.Keys(t.Weights)) {
		w := t.Weights[r]
		if !allowed[r] {
			p.add("%s: weights names %q, which is not in allowed_regions", where(), r)
		}
		if w < 1 || w > 10_000 {
			p.add("%s: weight %d of %q must be between 1 and 10000", where(), w, r)
		}
	}
	for _, r := range t.AllowedRegions {
		if _, ok := t.Weights[r]; !ok {
			p.add("%s: weights gives no weight to allowed region %q (list every allowed region)", where(), r)
		}
	}
}

func validateRegionalBlock(c *Config, rp *RegionalPolicy, p *problems) {
	const where = "regional"
	ih := c.IdentityHeaders
	switch {
	case !validHeaderName(rp.HintHeader):
		p.add("%s: hint_header %q is not a header name", where, rp.HintHeader)
	case slices.ContainsFunc([]string{ih.Tenant, ih.Subject, ih.KeyID, ih.Scopes}, func(h string) bool { return strings.EqualFold(h, rp.HintHeader) }):
		p.add("%s: hint_header %q is an identity header", where, rp.HintHeader)
	}
	if rp.MaxConfigLag != nil && *rp.MaxConfigLag > MaxConfigLagBound {
		p.add("%s: max_config_lag %d must be between 0 and %d", where, *rp.MaxConfigLag, MaxConfigLagBound)
	}
	if n := len(rp.RecoverySteps); n > MaxRecoverySteps {
		p.add("%s: recovery_steps has %d steps, at most %d", where, n, MaxRecoverySteps)
	}
	for i, s := range rp.RecoverySteps {
		switch {
		case s < 1 || s > 100:
			p.add("%s: recovery_steps[%d] = %d must be a share between 1 and 100", where, i, s)
		case i > 0 && s <= rp.RecoverySteps[i-1]:
			p.add("%s: recovery_steps must increase (%d follows %d)", where, s, rp.RecoverySteps[i-1])
		}
	}
	if n := len(rp.RecoverySteps); n > 0 && rp.RecoverySteps[n-1] != 100 {
		p.add("%s: recovery_steps must end at 100 (it ends at %d)", where, rp.RecoverySteps[n-1])
	}
	checkRange(p, where, "recovery_step_ms", rp.RecoveryStepMs, 100, 3_600_000)
	checkRange(p, where, "region_state_max_age_ms", rp.RegionStateMaxAgeMs, 1_000, 86_400_000)
}

func validateRegionalRoutes(c *Config, platforms map[string]*Platform, p *problems) {
	clusters := make(map[string]*Cluster, len(c.Clusters))
	for i := range c.Clusters {
		clusters[c.Clusters[i].Name] = &c.Clusters[i]
	}
	for _, r := range c.Routes {
		where := fmt.Sprintf("route %q", r.ID)
		if r.Platform == "" {
			if r.MaxReplicaLagMs != 0 || r.MaxSignalAgeMs != 0 {
				p.add("%s: max_replica_lag_ms and max_signal_age_ms need a platform", where)
			}
			continue
		}
		checkRange(p, where, "max_replica_lag_ms", r.MaxReplicaLagMs, 1, 3_600_000)
		checkRange(p, where, "max_signal_age_ms", r.MaxSignalAgeMs, 1, 3_600_000)
		if r.AuthPolicyID == "" {
			p.add("%s: platform %q needs an auth_policy_id (the tenant comes from the verified identity)", where, r.Platform)
		}
		pl := platforms[r.Platform]
		if pl == nil {
			p.add("%s: unknown platform %q", where, r.Platform)
			continue
		}
		names := []string{r.UpstreamCluster}
		for _, s := range r.TrafficSplit {
			if s.Revision != r.UpstreamCluster {
				names = append(names, s.Revision)
			}
		}
		for _, name := range names {
			cl := clusters[name]
			if cl == nil {
				continue // reported with the route's clusters
			}
			if !slices.Contains(pl.Clusters, name) {
				p.add("%s: cluster %q is not a cluster of platform %q", where, name, r.Platform)
			}
			for _, e := range cl.Endpoints {
				if e.Region == "" {
					p.add("%s: cluster %q endpoint %s has no region (a route with a platform picks endpoints by region)", where, name, e.Address)
				}
			}
		}
	}
}
