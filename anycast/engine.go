package anycast

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// VIPState is where a VIP is in its announce/drain/withdraw cycle.
type VIPState string

// VIP states.
const (
	StateWithdrawn VIPState = "withdrawn" // not announced
	StateAnnounced VIPState = "announced" // announced with its configured attributes
	StateDraining  VIPState = "draining"  // announced with 65535:0 and prepends, until the drain ends
	StateHeld      VIPState = "held"      // drained but kept announced by the guard
)

// route is the path a state puts on the wire; routeNone is no path.
type route int

const (
	routeNone route = iota
	routeUp
	routeDraining
	routeHeld
)

func (s VIPState) route() route {
	switch s {
	case StateAnnounced:
		return routeUp
	case StateDraining:
		return routeDraining
	case StateHeld:
		return routeHeld
	}
	return routeNone
}

// transition is one change of a VIP's state, reported for logs and
// metrics. A note (from == to) changes nothing: it says once that damping
// holds a healthy VIP back, and is only logged.
type transition struct {
	vip      *vip
	from, to VIPState
	why      string
	holdLeft time.Duration // > 0: a hold-down keeps the VIP from returning this much longer
	note     bool
}

// vip is a VIP's decision state.
type vip struct {
	cfg      VIP
	prefix   netip.Prefix
	inputs   []*input
	state    VIPState
	since    time.Time
	drainEnd time.Time
	downs    []time.Time // when it went down (health), within the flap window
	reason   string
	guard    string // the guard's latest verdict, when it was asked
	others   []SiteRoute
	retiring bool      // removed from the config: drain, withdraw, forget
	drain    string    // drained deliberately (operator or region), why; "" : not drained
	noted    time.Time // the hold-down end already logged in a note
}

// engine decides every VIP from its inputs, the damping and the guard. It
// is pure: the caller supplies the time and the sites, so tests drive it
// with a fake clock.
type engine struct {
	self        uint32
	minSites    int
	drain       time.Duration
	holdDown    time.Duration
	maxHoldDown time.Duration
	flapWindow  time.Duration
	inputs      []*input
	byName      map[string]*input
	vips        []*vip
	retiring    []*vip // removed by reconfigure, still on the wire
	stopping    bool
}

func newEngine(c *Config, now time.Time) *engine {
	e := &engine{self: c.SiteID}
	e.reconfigure(c, now)
	return e
}

// reconfigure takes a new config: inputs keep their samples and VIPs their
// state when name and kind (prefix) stay; new VIPs start withdrawn; VIPs
// gone from the config drain and are withdrawn without asking the guard
// (removing a VIP is deliberate, and validation refuses a config without
// VIPs).
func (e *engine) reconfigure(c *Config, now time.Time) {
	e.minSites = *c.Guard.MinSites
	e.drain, e.holdDown = ms(c.Drain.TimeMs), ms(c.Damping.HoldDownMs)
	e.maxHoldDown, e.flapWindow = ms(c.Damping.MaxHoldDownMs), ms(c.Damping.FlapWindowMs)
	old := e.byName
	e.inputs, e.byName = nil, map[string]*input{}
	for _, ic := range c.Inputs {
		in := old[ic.Name]
		if in == nil || in.cfg.Kind != ic.Kind {
			in = newInput(ic, now)
		}
		in.cfg = ic
		e.inputs = append(e.inputs, in)
		e.byName[ic.Name] = in
	}
	prev := map[netip.Prefix]*vip{}
	for _, v := range e.all() {
		prev[v.prefix] = v
	}
	e.vips, e.retiring = nil, nil
	for _, vc := range c.VIPs {
		p := netip.MustParsePrefix(vc.Prefix)
		v := prev[p]
		delete(prev, p)
		if v == nil {
			v = &vip{prefix: p, state: StateWithdrawn, since: now}
		}
		v.cfg, v.retiring, v.inputs = vc, false, nil
		for _, in := range e.inputs {
			if in.cfg.Global {
				v.inputs = append(v.inputs, in)
			}
		}
		for _, n := range vc.Inputs {
			v.inputs = append(v.inputs, e.byName[n])
		}
		e.vips = append(e.vips, v)
	}
	for _, v := range prev {
		v.retiring = true
		e.retiring = append(e.retiring, v)
	}
}

// all returns the configured VIPs and those retiring.
// drainStart is when the VIP of prefix began its current drain (the
// guard decides its withdrawal at the drain's end); zero when it is not
// draining.
func (e *engine) drainStart(prefix netip.Prefix) time.Time {
	for _, v := range e.all() {
		if v.prefix == prefix && v.state == StateDraining {
			return v.drainEnd.Add(-e.drain)
		}
	}
	return time.Time{}
}

func (e *engine) all() []*vip { return append(e.vips[:len(e.vips):len(e.vips)], e.retiring...) }

// prune forgets retired VIPs that are withdrawn, and returns them.
func (e *engine) prune() (gone []*vip) {
	keep := e.retiring[:0]
	for _, v := range e.retiring {
		if v.state == StateWithdrawn {
			gone = append(gone, v)
		} else {
			keep = append(keep, v)
		}
	}
	e.retiring = keep
	return gone
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// sample takes one sample of every input.
func (e *engine) sample(now time.Time) (changed []*input) {
	for _, in := range e.inputs {
		if in.sample(now) {
			changed = append(changed, in)
		}
	}
	return changed
}

// healthy says whether all of v's inputs are up, and names those that are not.
func (v *vip) healthy() (bool, string) {
	var down []string
	for _, in := range v.inputs {
		if !in.state {
			d := in.cfg.Name
			if in.lastDetail != "" {
				d += " (" + in.lastDetail + ")"
			}
			down = append(down, d)
		}
	}
	if len(down) > 0 {
		return false, "inputs down: " + strings.Join(down, ", ")
	}
	return true, "all inputs up"
}

// reannounceAt is when v may be announced again after going down: the
// hold-down doubles with every fall within the flap window.
func (e *engine) reannounceAt(v *vip, now time.Time) (time.Time, int) {
	keep := v.downs[:0]
	for _, t := range v.downs {
		if now.Sub(t) < e.flapWindow {
			keep = append(keep, t)
		}
	}
	v.downs = keep
	n := len(v.downs)
	if n == 0 {
		return time.Time{}, 0
	}
	hold := e.holdDown
	for i := 1; i < n && hold < e.maxHoldDown; i++ {
		hold *= 2
	}
	return v.downs[n-1].Add(min(hold, e.maxHoldDown)), n
}

// decide moves every VIP one step. sites gives the other sites announcing
// a prefix (only asked when a withdrawal is considered).
func (e *engine) decide(now time.Time, sites func(netip.Prefix) []SiteRoute) []transition {
	var out []transition
	for _, v := range e.all() {
		if t, ok := e.step(v, now, sites); ok {
			out = append(out, t)
		}
	}
	return out
}

func (e *engine) step(v *vip, now time.Time, sites func(netip.Prefix) []SiteRoute) (transition, bool) {
	ok, why := v.healthy()
	from := v.state
	var holdLeft time.Duration // > 0 while damping holds a healthy VIP back
	move := func(to VIPState, reason string) (transition, bool) {
		v.state, v.since, v.reason = to, now, reason
		return transition{vip: v, from: from, to: to, why: reason, holdLeft: holdLeft}, true
	}
	mayReturn := func() (bool, string) {
		if e.stopping {
			return false, "stopping"
		}
		if !ok {
			return false, why
		}
		at, n := e.reannounceAt(v, now)
		if now.Before(at) {
			holdLeft = at.Sub(now)
			return false, fmt.Sprintf("all inputs up but held down by damping for %s more (until %s; %d fall(s) within %s)",
				holdLeft.Round(time.Millisecond), at.Format(time.RFC3339Nano), n, e.flapWindow)
		}
		return true, why
	}
	// note says once per hold-down that it keeps the healthy VIP back.
	note := func(reason string) (transition, bool) {
		at := now.Add(holdLeft)
		if holdLeft <= 0 || v.noted.Equal(at) {
			return transition{}, false
		}
		v.noted = at
		return transition{vip: v, from: v.state, to: v.state, why: reason, holdLeft: holdLeft, note: true}, true
	}
	if v.retiring {
		const gone = "removed from the config"
		switch {
		case v.state == StateAnnounced || v.state == StateHeld:
			v.drainEnd = now.Add(e.drain)
			return move(StateDraining, gone)
		case v.state == StateDraining && !now.Before(v.drainEnd):
			return move(StateWithdrawn, gone)
		}
		v.reason = gone
		return transition{}, false
	}
	if v.drain != "" {
		return e.stepDrained(v, now, sites, move)
	}
	switch v.state {
	case StateWithdrawn:
		if yes, reason := mayReturn(); yes {
			v.guard, v.others = "", nil
			return move(StateAnnounced, reason)
		} else {
			v.reason = reason
			return note(reason)
		}
	case StateAnnounced:
		switch {
		case e.stopping:
			v.drainEnd = now.Add(e.drain)
			return move(StateDraining, "stopping")
		case !ok:
			v.drainEnd = now.Add(e.drain)
			v.downs = append(v.downs, now)
			return move(StateDraining, why)
		}
		v.reason = why
	case StateDraining, StateHeld:
		yes, reason := mayReturn()
		if yes {
			v.guard, v.others = "", nil
			return move(StateAnnounced, reason)
		}
		if e.stopping {
			v.reason = "stopping"
			return transition{}, false
		}
		if holdLeft > 0 {
			why = reason // healthy, but the hold-down lets the drain go on
		}
		if v.state == StateDraining && now.Before(v.drainEnd) {
			v.reason = fmt.Sprintf("draining until %s: %s", v.drainEnd.Format(time.RFC3339Nano), why)
			return note(v.reason)
		}
		v.others = sites(v.prefix)
		allow, _, verdict := guardAllows(e.self, e.minSites, v.others)
		v.guard = verdict
		switch {
		case allow && v.state == StateDraining:
			return move(StateWithdrawn, why+"; guard: "+verdict)
		case allow:
			// Others may have counted this site as held and staying; it
			// shows itself leaving for a full drain before it goes, so
			// none of them withdraws relying on it.
			v.drainEnd = now.Add(e.drain)
			return move(StateDraining, "guard now allows ("+verdict+"): draining once more before withdrawing; "+why)
		}
		reason = "guard holds it: " + verdict + "; " + why
		if v.state == StateHeld {
			v.reason = reason
			return note(reason)
		}
		return move(StateHeld, reason)
	}
	return transition{}, false
}

// stepDrained moves a deliberately drained VIP: graceful shutdown and
// prepends for the drain time, then withdrawn, whatever its health and
// without asking the guard (the reason says what it would have said).
func (e *engine) stepDrained(v *vip, now time.Time, sites func(netip.Prefix) []SiteRoute,
	move func(VIPState, string) (transition, bool)) (transition, bool) {
	switch v.state {
	case StateAnnounced, StateHeld:
		v.drainEnd = now.Add(e.drain)
		return move(StateDraining, v.drain)
	case StateDraining:
		if now.Before(v.drainEnd) {
			v.reason = fmt.Sprintf("draining until %s: %s", v.drainEnd.Format(time.RFC3339Nano), v.drain)
			return transition{}, false
		}
		v.others = sites(v.prefix)
		allow, _, verdict := guardAllows(e.self, e.minSites, v.others)
		v.guard = verdict
		why := v.drain + "; guard: " + verdict
		if !allow {
			why = v.drain + "; the guard would hold it (" + verdict + "), but a drain is deliberate"
		}
		return move(StateWithdrawn, why)
	}
	v.reason = v.drain
	return transition{}, false
}

// drained says whether every VIP is out of service enough for the sessions
// to close on a stop: withdrawn, held, or drained for the full drain time.
func (e *engine) drained(now time.Time) bool {
	for _, v := range e.all() {
		if v.state == StateAnnounced || v.state == StateDraining && now.Before(v.drainEnd) {
			return false
		}
	}
	return true
}
