package anycast

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// SiteState is how a site announces a VIP, as its site community says.
type SiteState string

// Site states, carried as COMMUNITY_ASN:STATE:SITE_ID (STATE 1, 2, 3).
const (
	SiteUp       SiteState = "up"       // announced, healthy
	SiteDraining SiteState = "draining" // announced with graceful shutdown, on its way out
	SiteHeld     SiteState = "held"     // unhealthy, but kept announced by its guard
)

func (s SiteState) code() uint32 {
	switch s {
	case SiteUp:
		return 1
	case SiteDraining:
		return 2
	case SiteHeld:
		return 3
	}
	return 0
}

func siteStateOf(code uint32) (SiteState, bool) {
	switch code {
	case 1:
		return SiteUp, true
	case 2:
		return SiteDraining, true
	case 3:
		return SiteHeld, true
	}
	return "", false
}

// rank orders states by how much they count for the guard; when sources
// disagree about a site the lowest wins.
func (s SiteState) rank() int {
	switch s {
	case SiteUp:
		return 2
	case SiteHeld:
		return 1
	}
	return 0
}

// SiteRoute is one other site announcing a VIP.
type SiteRoute struct {
	Site  uint32    `json:"site"`
	State SiteState `json:"state"`
	From  string    `json:"from,omitempty"` // bgp peer address, "fleet" or "control"
	// Name is the site's name at the control plane (ControlView), whose
	// entries need no site id.
	Name string `json:"name,omitempty"`
}

// FleetView returns the sites that announce prefix as the control plane
// sees them (this site's own entry is ignored). It is called on every
// decision and must not block.
type FleetView func(prefix netip.Prefix) []SiteRoute

// ControlView is the control plane's view of the sites that announce
// prefix (this site left out) and whether that view is fresh; source says
// which view it is, for the status (e.g. "region state 1.4"). While the
// view is fresh it is the guard's only source of other sites: a router
// that sends only its best path shows a site little of the others, the
// control plane sees every site's report. When it is stale or absent the
// guard counts the BGP paths and Fleet instead. Every entry counts as the
// state it carries; entries are told apart by Name (else Site).
//
// leaving, when not zero, is when this site began to drain prefix: the
// guard decides whether it may withdraw. The view must then say it is
// not fresh unless this site's report and every counted site's were made
// since: an older report may come from a site that has stopped reporting
// since (its node down) and stays listed as it last reported; with every
// site unhealthy at once each would count the others as up and all would
// withdraw. The guard then counts BGP paths, which show a site leaving at
// once. It is called on every decision and must not block.
type ControlView func(prefix netip.Prefix, leaving time.Time) (sites []SiteRoute, fresh bool, source string)

// controlSites: one entry per named site, sorted by name then site.
func controlSites(in []SiteRoute) []SiteRoute {
	out := []SiteRoute{}
	seen := map[string]bool{}
	for _, r := range in {
		key := r.Name
		if key == "" {
			key = fmt.Sprint("#", r.Site)
		}
		if r.State.code() == 0 || seen[key] {
			continue
		}
		seen[key] = true
		r.From = "control"
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b SiteRoute) int {
		if a.Name != b.Name {
			return strings.Compare(a.Name, b.Name)
		}
		return int(int64(a.Site) - int64(b.Site))
	})
	return out
}

// mergeSites joins sources: one entry per site other than self, in the state
// that counts least when sources disagree, sorted by site.
func mergeSites(self uint32, lists ...[]SiteRoute) []SiteRoute {
	by := map[uint32]SiteRoute{}
	for _, l := range lists {
		for _, r := range l {
			if r.Site == self || r.Site == 0 || r.State.code() == 0 {
				continue
			}
			if old, ok := by[r.Site]; !ok || r.State.rank() < old.State.rank() {
				by[r.Site] = r
			}
		}
	}
	out := make([]SiteRoute, 0, len(by))
	for _, r := range by {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b SiteRoute) int { return int(int64(a.Site) - int64(b.Site)) })
	return out
}

// guardAllows says whether site self may withdraw a VIP that the others
// announce: it may when at least minSites of them will stay, counting sites
// that are up and held sites with a lower id than self. Held sites order
// by id so that when every site is unhealthy the lowest minSites ids stay
// and the rest go; draining sites never count, since they are leaving.
// Every withdrawal comes at the end of a drain (a held site drains once
// more before it goes), so as long as a drain outlasts how late sites see
// each other's paths, no site withdraws counting on one that is already
// leaving, and at least minSites stay (TestGuardFleetRandomHealth).
func guardAllows(self uint32, minSites int, others []SiteRoute) (bool, int, string) {
	up, held := 0, 0
	for _, r := range others {
		switch {
		case r.State == SiteUp:
			up++
		case r.State == SiteHeld && r.Site < self:
			held++
		}
	}
	n := up + held
	why := fmt.Sprintf("%d other site(s) would stay (%d up, %d held with a lower id), min_sites %d", n, up, held, minSites)
	return n >= minSites, n, why
}
