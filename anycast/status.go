package anycast

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// StatusPath is where the agent mounts Handler on its admin listener;
// `rampart anycast status` fetches it.
const StatusPath = "/anycast/status"

// Status is the announcer's whole state, as JSON on StatusPath.
type Status struct {
	Time     time.Time `json:"time"`
	Site     uint32    `json:"site"`
	LocalAS  uint32    `json:"local_as"`
	RouterID string    `json:"router_id"`
	DryRun   string    `json:"dry_run"`
	// PrefixesAnnounced counts the paths on the wire: 0 in a dry run,
	// where PrefixesWouldAnnounce counts what would be sent.
	PrefixesAnnounced     int             `json:"prefixes_announced"`
	PrefixesWouldAnnounce int             `json:"prefixes_would_announce,omitempty"`
	Stopping              bool            `json:"stopping"`
	MinSites              int             `json:"min_sites"`
	Sessions              []SessionStatus `json:"sessions"`
	VIPs                  []VIPStatus     `json:"vips"`
	Inputs                []InputStatus   `json:"inputs"`
	// Drains are the deliberate drains in force (operator, region).
	Drains []VIPDrain `json:"drains"`
	// GuardSource says where the guard counts other sites from.
	GuardSource string `json:"guard_source,omitempty"`
}

// VIPStatus is one VIP: its state, why, what is on the wire and the guard.
type VIPStatus struct {
	Prefix string    `json:"prefix"`
	State  VIPState  `json:"state"`
	Since  time.Time `json:"since"`
	// Reason says why the VIP is (or is not) announced.
	Reason string `json:"reason"`
	// OnWire is the path the speaker sends; nil when none, and always in
	// a dry run, where WouldSend is the path it would send and DryRun
	// says what it would do ("would announce", "would not announce", …). An
	// unspecified next hop is shown as the session's local address.
	OnWire    *Attributes `json:"on_wire,omitempty"`
	WouldSend *Attributes `json:"would_send,omitempty"`
	DryRun    string      `json:"dry_run,omitempty"`
	WireError string      `json:"wire_error,omitempty"`
	Inputs    []string    `json:"inputs"`
	DrainEnd  time.Time   `json:"drain_end,omitzero"`
	// HoldDownUntil: a re-announcement waits until then (damping).
	HoldDownUntil time.Time `json:"hold_down_until,omitzero"`
	RecentFalls   int       `json:"recent_falls"`
	// Drained says who drains the VIP deliberately, and why ("" : nobody).
	Drained string      `json:"drained,omitempty"`
	Guard   GuardStatus `json:"guard"`
}

// GuardStatus is the guard's view of one VIP.
type GuardStatus struct {
	Active bool        `json:"active"`         // holding the VIP announced
	Last   string      `json:"last,omitempty"` // its latest verdict
	Others []SiteRoute `json:"other_sites"`    // other sites announcing the VIP
	Note   string      `json:"note,omitempty"`
}

// Status reports sessions, VIPs, inputs and the guard.
func (a *Announcer) Status() Status {
	now := time.Now()
	a.mu.Lock()
	st := Status{Time: now, Site: a.fixed.SiteID, LocalAS: a.fixed.LocalAS, RouterID: a.fixed.RouterID,
		DryRun: a.fixed.DryRun, Stopping: a.stopping, MinSites: a.eng.minSites,
		Sessions: []SessionStatus{}, VIPs: []VIPStatus{}, Inputs: []InputStatus{}, Drains: a.drainList()}
	for _, in := range a.eng.inputs {
		st.Inputs = append(st.Inputs, in.status())
	}
	for _, v := range a.eng.all() {
		vs := VIPStatus{Prefix: v.cfg.Prefix, State: v.state, Since: v.since, Reason: v.reason,
			WireError: a.wireErr[v], Inputs: []string{}, Drained: drainText(a.drainsOf(v))}
		if v.reason == "" {
			vs.Reason = "not decided yet"
		}
		if w := a.applied[v]; a.fixed.DryRun == DryRunOff {
			vs.OnWire = w.a
		} else {
			vs.WouldSend, vs.DryRun = w.a, "would not announce"
			if w.r != routeNone {
				vs.DryRun = "would " + routeName(w.r)
			}
		}
		if w := a.applied[v]; w.r != routeNone && a.fixed.DryRun == DryRunOff {
			st.PrefixesAnnounced++
		} else if w.r != routeNone {
			st.PrefixesWouldAnnounce++
		}
		for _, in := range v.inputs {
			vs.Inputs = append(vs.Inputs, in.cfg.Name)
		}
		if v.state == StateDraining {
			vs.DrainEnd = v.drainEnd
		}
		vs.HoldDownUntil, vs.RecentFalls = a.eng.reannounceAt(v, now)
		if !vs.HoldDownUntil.After(now) {
			vs.HoldDownUntil = time.Time{}
		}
		vs.Guard = GuardStatus{Active: v.state == StateHeld, Last: v.guard, Others: a.sites(v.prefix, a.eng.drainStart(v.prefix))}
		if len(vs.Guard.Others) == 0 {
			vs.Guard.Note = "no other site seen announcing this VIP: a withdrawal would be held"
		}
		st.VIPs = append(st.VIPs, vs)
	}
	st.GuardSource = a.guardSource
	sp := a.sp
	a.mu.Unlock()
	if sp != nil {
		st.Sessions = sp.sessions(context.Background())
	}
	for i := range st.VIPs {
		st.VIPs[i].OnWire = resolveNextHop(st.VIPs[i].OnWire, st.Sessions)
		st.VIPs[i].WouldSend = resolveNextHop(st.VIPs[i].WouldSend, st.Sessions)
	}
	return st
}

// Handler serves Status as JSON (GET only).
func (a *Announcer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(a.Status())
	})
}
