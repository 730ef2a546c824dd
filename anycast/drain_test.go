package anycast

import (
	"strings"
	"testing"
)

// TestDrainedVIP: a deliberate drain takes a healthy VIP through draining
// to withdrawn whatever the guard says (it says what it would have held),
// keeps it withdrawn while healthy, and lifting it announces at once: a
// drain is not a fall, so no hold-down.
func TestDrainedVIP(t *testing.T) {
	e := newTestEngine(t, unitConfig(1))
	v := e.vips[0]
	now := run(e, t0, 3, true, noSites)
	if v.state != StateAnnounced {
		t.Fatalf("not announced: %s", v.state)
	}
	v.drain = "drained by operator: maintenance"
	now = run(e, now, 1, true, noSites)
	if v.state != StateDraining || v.reason != v.drain {
		t.Fatalf("drain: %s (%s)", v.state, v.reason)
	}
	now = run(e, now, 9, true, noSites)
	if v.state != StateDraining {
		t.Fatalf("before the drain end: %s", v.state)
	}
	now = run(e, now, 1, true, noSites)
	if v.state != StateWithdrawn || !strings.Contains(v.reason, "the guard would hold it") {
		t.Fatalf("at the drain end, alone: %s (%s)", v.state, v.reason)
	}
	now = run(e, now, 5, true, noSites)
	if v.state != StateWithdrawn || len(v.downs) != 0 {
		t.Fatalf("drained and healthy: %s, %d falls", v.state, len(v.downs))
	}
	v.drain = ""
	run(e, now, 1, true, noSites)
	if v.state != StateAnnounced {
		t.Fatalf("undrained: %s (%s)", v.state, v.reason)
	}
}

func TestCheckDrainAndControlSites(t *testing.T) {
	d := VIPDrain{Source: DrainOperator, VIP: "192.0.2.7/24", Reason: "work", Since: t0}
	if err := CheckDrain(&d); err != nil || d.VIP != "192.0.2.0/24" {
		t.Fatalf("%+v %v", d, err)
	}
	for _, bad := range []VIPDrain{{Source: "me"}, {Source: DrainRegion, VIP: "x"}, {Source: DrainOperator, Reason: "a\tb"},
		{Source: DrainOperator, Reason: strings.Repeat("r", MaxDrainReason+1)}} {
		if err := CheckDrain(&bad); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
	got := controlSites([]SiteRoute{{Name: "b", State: SiteUp}, {Name: "a", State: SiteUp}, {Name: "b", State: SiteUp},
		{Name: "c", State: "bogus"}, {Site: 7, State: SiteHeld}})
	if len(got) != 3 || got[0].Site != 7 || got[1].Name != "a" || got[2].Name != "b" || got[1].From != "control" {
		t.Fatalf("controlSites: %+v", got)
	}
}
