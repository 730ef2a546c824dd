package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// InputRegion is the regional health input (bool, polled at every
// sample): down while a fresh region state says this site's region
// (-region) is unhealthy. A stale or absent region state (the control
// plane unreachable) is no reason to withdraw: the last decision stays.
const InputRegion = "region"

// regionKeeper turns the region-state document into this site's region
// decisions (health for the region input, draining for the region drain)
// and keeps the last decision of a fresh document while the document is
// stale, absent or does not list the region.
type regionKeeper struct {
	a *Agent

	mu      sync.Mutex
	health  *healthVerdict // last fresh verdict on health
	drain   *healthVerdict // last fresh verdict on draining (ok = draining)
	kept    bool           // the latest look kept a last decision
	keptWhy string
}

// look reads the document: the region's entry when fresh and listed, else
// why not (with when it went stale).
func (k *regionKeeper) look() (reg regionstate.Region, version string, ok bool, why string) {
	s, fresh := k.a.rs.Current()
	switch {
	case s == nil:
		return reg, "", false, "region state absent"
	case !fresh:
		return reg, s.Version.String(), false, fmt.Sprintf("region state %s stale since %s", s.Version,
			s.Created.Add(k.a.rs.MaxAge()).UTC().Format(time.RFC3339))
	}
	r, found := s.Region(k.a.c.Region)
	if !found {
		return reg, s.Version.String(), false, fmt.Sprintf("region state %s does not list region %s", s.Version, k.a.c.Region)
	}
	return r, s.Version.String(), true, ""
}

func (k *regionKeeper) setKept(kept bool, why string) {
	k.kept, k.keptWhy = kept, why
	k.a.m.regionKept.Set(b2f(kept))
}

// regionHealthy is the value of the region input.
func (k *regionKeeper) regionHealthy() (bool, string) {
	if k.a.rs == nil {
		return true, "no -region-state: region health not considered"
	}
	reg, v, ok, why := k.look()
	k.mu.Lock()
	defer k.mu.Unlock()
	if ok {
		d := fmt.Sprintf("region %s healthy per region state %s", reg.Name, v)
		if !reg.Healthy {
			d = fmt.Sprintf("region %s unhealthy per region state %s", reg.Name, v)
		}
		k.health = &healthVerdict{ok: reg.Healthy, detail: d}
		k.setKept(false, "")
		return reg.Healthy, d
	}
	k.setKept(true, why)
	if k.health == nil {
		return true, why + ", keeping last decision (none yet: healthy)"
	}
	return k.health.ok, why + ", keeping last decision (" + k.health.detail + ")"
}

// regionDrains is the region drain: every VIP while a fresh document says
// the region is draining; the last decision while it is not fresh.
func (k *regionKeeper) regionDrains() []anycast.VIPDrain {
	if k.a.rs == nil {
		return nil
	}
	reg, v, ok, why := k.look()
	k.mu.Lock()
	defer k.mu.Unlock()
	if ok {
		k.drain = &healthVerdict{ok: reg.Draining, detail: fmt.Sprintf("region %s draining per region state %s", reg.Name, v)}
	} else {
		k.setKept(true, why)
	}
	if k.drain == nil || !k.drain.ok {
		return nil
	}
	reason := k.drain.detail
	if !ok {
		reason += " (" + why + ", keeping last decision)"
	}
	return []anycast.VIPDrain{{VIP: "", Reason: reason}}
}

// regionDrainLoop feeds the region drain to the announcer every poll.
func (a *Agent) regionDrainLoop(ctx context.Context) {
	t := time.NewTicker(a.c.Poll)
	defer t.Stop()
	for {
		if ann := a.ac.announcer(); ann != nil {
			drains := a.rk.regionDrains()
			since := map[string]time.Time{}
			for _, d := range ann.Drains() {
				if d.Source == anycast.DrainRegion {
					since[d.VIP] = d.Since
				}
			}
			for i := range drains {
				if s, ok := since[drains[i].VIP]; ok {
					drains[i].Since = s
				} else {
					drains[i].Since = time.Now()
				}
			}
			if err := ann.SetDrains(anycast.DrainRegion, drains); err != nil {
				a.log.Error("anycast: region drain not applied", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// controlView is the guard's view of the fleet from a fresh region state:
// the sites (other than this one, by -site-name) whose reports say they
// announce the prefix. It is fresh only while the document is fresh and
// lists this site, so the control plane is known to hear its reports;
// otherwise the guard counts BGP paths. When the guard decides a
// withdrawal (leaving: when this site began to drain the prefix), the
// document must also hold this site's report from since then, no longer
// announcing the prefix, and every site it lists announcing must have
// reported since: a site whose node stopped (or its proxy, which carries
// the node client) stays listed as it last reported, and with every site
// unhealthy at once each would count the others as up and all would
// withdraw. Otherwise the guard counts BGP paths for that decision.
func (a *Agent) controlView(prefix netip.Prefix, leaving time.Time) ([]anycast.SiteRoute, bool, string) {
	s, fresh := a.rs.Current()
	switch {
	case s == nil:
		return nil, false, "region state absent"
	case !fresh:
		return nil, false, fmt.Sprintf("region state %s stale", s.Version)
	}
	self, ok := s.Site(a.c.SiteName)
	if !ok {
		return nil, false, fmt.Sprintf("region state %s does not list site %s", s.Version, a.c.SiteName)
	}
	p := prefix.Masked().String()
	if !leaving.IsZero() {
		if self.ReportedAt.Before(leaving) || slices.Contains(self.Announcing, p) {
			return nil, false, fmt.Sprintf("region state %s has no report of site %s since it began to drain %s", s.Version, a.c.SiteName, p)
		}
		for _, st := range s.Sites {
			if st.Name != a.c.SiteName && slices.Contains(st.Announcing, p) && st.ReportedAt.Before(leaving) {
				return nil, false, fmt.Sprintf("region state %s: site %s's report is from before this site began to drain %s", s.Version, st.Name, p)
			}
		}
	}
	var out []anycast.SiteRoute
	for _, st := range s.Sites {
		if st.Name != a.c.SiteName && slices.Contains(st.Announcing, p) {
			out = append(out, anycast.SiteRoute{Name: st.Name, State: anycast.SiteUp})
		}
	}
	return out, true, "region state " + s.Version.String()
}
