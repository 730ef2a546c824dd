package anycast

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestHoldDownLogged: the VIP falls, its input rises again during the
// drain, but the hold-down (damping) keeps it from returning. The drain
// goes on to a withdrawal whose log line says the hold-down holds it back
// and for how long, and a note says so once, not every sample. Driven with
// a fake clock through tick, so no wall-clock time matters.
func TestHoldDownLogged(t *testing.T) {
	c := unitConfig(1) // sample 1 s, drain 10 s
	c.DryRun = DryRunNoBGP
	c.Inputs[0].Rise, c.Inputs[0].Fall = 1, 1
	c.Damping.HoldDownMs = 60000
	c.Damping.MaxHoldDownMs = 60000
	var out syncBuffer
	a, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(&out, nil)),
		Fleet: func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 2, State: SiteUp}} }})
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	step := func(up bool, n int) {
		for range n {
			if err := a.SetUp("ready", up, "test"); err != nil {
				t.Fatal(err)
			}
			a.tick(now, true)
			now = now.Add(time.Second)
		}
	}
	step(true, 1)
	if st := a.Status().VIPs[0]; st.State != StateAnnounced {
		t.Fatalf("after a good sample: %+v", st)
	}
	step(false, 1) // t0+1s: falls, drain until t0+11s, hold-down until t0+61s
	step(true, 12) // healthy again from t0+2s, held down: the drain runs out
	if st := a.Status().VIPs[0]; st.State != StateWithdrawn || !strings.Contains(st.Reason, "held down by damping") {
		t.Fatalf("after the drain: %+v", st)
	}
	var withdraw, notes []string
	for _, l := range strings.Split(out.String(), "\n") {
		switch {
		case strings.Contains(l, `msg="anycast: vip withdrawn"`):
			withdraw = append(withdraw, l)
		case strings.Contains(l, "held down by damping\""):
			notes = append(notes, l)
		}
	}
	// Withdrawn at t0+11s, the hold-down ends at t0+61s: 50 s left.
	if len(withdraw) != 1 || !strings.Contains(withdraw[0], "hold_down_left=50s") ||
		!strings.Contains(withdraw[0], "all inputs up but held down by damping for 50s more") {
		t.Fatalf("withdraw log lines: %q", withdraw)
	}
	// One note when the hold-down first held the healthy VIP (t0+2s, 59 s left).
	if len(notes) != 1 || !strings.Contains(notes[0], "hold_down_left=59s") ||
		!strings.Contains(notes[0], `msg="anycast: vip draining, held down by damping"`) {
		t.Fatalf("hold-down notes: %q\nlog:\n%s", notes, out.String())
	}
	step(true, 50) // t0+63s: the hold-down is over
	if st := a.Status().VIPs[0]; st.State != StateAnnounced {
		t.Fatalf("after the hold-down: %+v", st)
	}
}
