package anycast

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Drain sources: who asked for a drain.
const (
	DrainOperator = "operator" // `rampart anycast drain`, through the agent's admin API
	DrainRegion   = "region"   // the region-state document says this site's region is draining
)

// VIPDrain is a deliberate drain of one VIP ("" : every VIP) by a source: the
// VIP is announced with graceful shutdown and prepends for the drain time,
// then withdrawn, and stays withdrawn until the drain is lifted. A drain is
// not a fall: it is not damped and the guard does not hold it (as for a
// planned stop, the status says what the guard would have said).
type VIPDrain struct {
	Source string    `json:"source"`
	VIP    string    `json:"vip,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since"`
}

// MaxDrainReason bounds a drain's reason, in bytes.
const MaxDrainReason = 256

// CheckDrain refuses a drain whose source, VIP or reason is not usable and
// writes its VIP masked.
func CheckDrain(d *VIPDrain) error {
	if d.Source != DrainOperator && d.Source != DrainRegion {
		return fmt.Errorf("drain source %q: want %s or %s", d.Source, DrainOperator, DrainRegion)
	}
	if d.VIP != "" {
		p, err := netip.ParsePrefix(d.VIP)
		if err != nil {
			return fmt.Errorf("drain vip %q: %w", d.VIP, err)
		}
		d.VIP = p.Masked().String()
	}
	if len(d.Reason) > MaxDrainReason {
		return fmt.Errorf("drain reason is %d bytes, over the %d limit", len(d.Reason), MaxDrainReason)
	}
	for _, r := range d.Reason {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("drain reason %.64q has a control character", d.Reason)
		}
	}
	return nil
}

// SetDrains replaces the drains of one source (nil: none). Each drain
// names a VIP prefix (it need not be configured yet: it applies once it
// is) or "" for every VIP.
func (a *Announcer) SetDrains(source string, drains []VIPDrain) error {
	out := make([]VIPDrain, 0, len(drains))
	for _, d := range drains {
		d.Source = source
		if err := CheckDrain(&d); err != nil {
			return err
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y VIPDrain) int { return cmp.Compare(x.VIP, y.VIP) })
	out = slices.CompactFunc(out, func(x, y VIPDrain) bool { return x.VIP == y.VIP })
	a.mu.Lock()
	old := a.drains[source]
	a.drains[source] = out
	a.mu.Unlock()
	if !slices.EqualFunc(old, out, func(x, y VIPDrain) bool { return x.VIP == y.VIP && x.Reason == y.Reason }) {
		a.log.Info("anycast: drains set", "source", source, "drains", drainText(out))
		a.poke()
	}
	return nil
}

// Drains returns every drain in force, by source then VIP.
func (a *Announcer) Drains() []VIPDrain {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drainList()
}

// drainList: callers hold mu.
func (a *Announcer) drainList() []VIPDrain {
	out := []VIPDrain{}
	for _, src := range []string{DrainOperator, DrainRegion} {
		out = append(out, a.drains[src]...)
	}
	return out
}

// drainsOf says which drains cover v (sources sorted). Callers hold mu.
func (a *Announcer) drainsOf(v *vip) []VIPDrain {
	var out []VIPDrain
	for _, src := range []string{DrainOperator, DrainRegion} {
		for _, d := range a.drains[src] {
			if d.VIP == "" || d.VIP == v.prefix.String() {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// markDrains gives each VIP its drain reason ("" : none) before a
// decision. Callers hold mu.
func (a *Announcer) markDrains() {
	for _, v := range a.eng.all() {
		v.drain = drainText(a.drainsOf(v))
	}
}

func drainText(ds []VIPDrain) string {
	var parts []string
	for _, d := range ds {
		s := "drained by " + d.Source
		if d.VIP == "" {
			s += " (every VIP)"
		}
		if d.Reason != "" {
			s += ": " + d.Reason
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
