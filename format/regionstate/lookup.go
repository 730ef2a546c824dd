package regionstate

import (
	"cmp"
	"slices"
)

// Region returns the region called name. It takes a binary search and
// allocates nothing; s must be valid (sorted), as Parse returns it.
func (s *State) Region(name string) (Region, bool) {
	if s == nil {
		return Region{}, false
	}
	i, ok := slices.BinarySearchFunc(s.Regions, name, func(r Region, n string) int { return cmp.Compare(r.Name, n) })
	if !ok {
		return Region{}, false
	}
	return s.Regions[i], true
}

// Platform returns the platform called name, like Region.
func (s *State) Platform(name string) (Platform, bool) {
	if s == nil {
		return Platform{}, false
	}
	i, ok := slices.BinarySearchFunc(s.Platforms, name, func(p Platform, n string) int { return cmp.Compare(p.Name, n) })
	if !ok {
		return Platform{}, false
	}
	return s.Platforms[i], true
}

// Replica returns the platform's replica in region, like Region.
func (p *Platform) Replica(region string) (Replica, bool) {
	i, ok := slices.BinarySearchFunc(p.Replicas, region, func(r Replica, n string) int { return cmp.Compare(r.Region, n) })
	if !ok {
		return Replica{}, false
	}
	return p.Replicas[i], true
}

// Site returns the site called name, like Region.
func (s *State) Site(name string) (Site, bool) {
	if s == nil {
		return Site{}, false
	}
	i, ok := slices.BinarySearchFunc(s.Sites, name, func(st Site, n string) int { return cmp.Compare(st.Name, n) })
	if !ok {
		return Site{}, false
	}
	return s.Sites[i], true
}

// QuotaLease returns the lease of policy in region, like Region.
func (s *State) QuotaLease(policy, region string) (QuotaLease, bool) {
	if s == nil {
		return QuotaLease{}, false
	}
	i, ok := slices.BinarySearchFunc(s.QuotaLeases, QuotaLease{Policy: policy, Region: region}, compareLease)
	if !ok {
		return QuotaLease{}, false
	}
	return s.QuotaLeases[i], true
}
