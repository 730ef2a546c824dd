package plane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
)

// A report's per-VIP anycast states and guard are stored canonically
// (prefixes masked, sorted) and shown in the fleet view; a bad VIP or
// guard refuses the report, saying which VIP and why, and leaves the
// node's last good report in place.
func TestReportVIPStates(t *testing.T) {
	p := newPlane(t)
	ctx := context.Background()
	since := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	good := model.Status{Identity: model.Identity{NodeID: "fra-1", Region: "eu", Zone: "eu-1a"}, Ready: true,
		Announcing: []string{"203.0.113.0/24"},
		VIPs: []model.VIPReport{
			{Prefix: "203.0.113.9/24", State: model.VIPHeld, Reason: "guard holds it: 0 other sites < min 1", Since: since, GuardHolding: true, GuardVerdict: "hold", OtherSites: 0},
			{Prefix: "2001:db8::1/48", State: model.VIPWithdrawn, Reason: "input proxy down"},
			{Prefix: "198.51.100.0/24", State: model.VIPDraining, Reason: "drained", Drained: "operator: maintenance", OtherSites: 2},
		},
		Guard: &model.AnycastGuard{MinSites: 1, Source: "bgp", Holding: 1}}
	if err := p.Report(ctx, good); err != nil {
		t.Fatalf("good report: %v", err)
	}
	node := func() plane.FleetNode {
		f, err := p.Fleet(ctx)
		if err != nil || len(f.Nodes) != 1 {
			t.Fatalf("fleet: %v, %+v", err, f)
		}
		return f.Nodes[0]
	}
	n := node()
	var got []string
	for _, v := range n.VIPs {
		got = append(got, v.Prefix+"="+v.State)
	}
	if strings.Join(got, ",") != "198.51.100.0/24=draining,2001:db8::/48=withdrawn,203.0.113.0/24=held" {
		t.Fatalf("stored VIPs %v", got)
	}
	if !n.AgentSeen || n.Guard == nil || n.Guard.MinSites != 1 || n.Guard.Holding != 1 || !n.VIPs[2].GuardHolding || !n.VIPs[2].Since.Equal(since) {
		t.Fatalf("stored node %+v guard %+v", n, n.Guard)
	}

	vip := func(f func(v *model.VIPReport)) model.Status {
		s := good
		s.VIPs = []model.VIPReport{{Prefix: "192.0.2.0/24", State: model.VIPAnnounced}}
		f(&s.VIPs[0])
		return s
	}
	many := good
	many.VIPs = make([]model.VIPReport, plane.MaxReportVIPs+1)
	negGuard := good
	negGuard.Guard = &model.AnycastGuard{MinSites: -1}
	ctlGuard := good
	ctlGuard.Guard = &model.AnycastGuard{Source: "bgp\x00"}
	for _, c := range []struct {
		name string
		s    model.Status
		want string
	}{
		{"bad prefix", vip(func(v *model.VIPReport) { v.Prefix = "192.0.2.300/24" }), "vips[0]"},
		{"no prefix", vip(func(v *model.VIPReport) { v.Prefix = "" }), "vips[0]"},
		{"bad state", vip(func(v *model.VIPReport) { v.State = "flapping" }), `state "flapping"`},
		{"empty state", vip(func(v *model.VIPReport) { v.State = "" }), "state"},
		{"control character", vip(func(v *model.VIPReport) { v.Reason = "a\nb" }), "vips[0] reason has a control character"},
		{"long verdict", vip(func(v *model.VIPReport) { v.GuardVerdict = strings.Repeat("x", 2049) }), "vips[0] guard_verdict is 2049 bytes"},
		{"negative other sites", vip(func(v *model.VIPReport) { v.OtherSites = -1 }), "other_sites -1"},
		{"too many", many, "4097 VIPs is over the 4096 limit"},
		{"negative guard", negGuard, "min_sites -1"},
		{"guard source", ctlGuard, "guard source has a control character"},
	} {
		err := p.Report(ctx, c.s)
		if !errors.Is(err, plane.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a bad request saying %q", c.name, err, c.want)
		}
	}
	if n := node(); len(n.VIPs) != 3 || n.VIPs[2].State != model.VIPHeld {
		t.Fatalf("a refused report replaced the good one: %+v", n.VIPs)
	}
}
