package region

import (
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

// The scenario table: tenant x failover mode x request class x region
// health x lag x signal age x writer x hint, at t0 with a fresh state.
func TestDecideScenarios(t *testing.T) {
	p, _ := loadPolicy(t, nil)
	type tc struct {
		name    string
		tenant  string
		route   string
		state   func(s *regionstate.State) *regionstate.State // nil: healthyState as is
		hint    string
		local   string
		roll    uint32
		reason  Reason
		target  string // "" when the decision fails
		targets string // the candidates, "|"-joined in index order
	}
	down := func(name string) func(s *regionstate.State) *regionstate.State {
		return func(s *regionstate.State) *regionstate.State { region(s, name).Healthy = false; return s }
	}
	lag := func(region string, ms uint64) func(s *regionstate.State) *regionstate.State {
		return func(s *regionstate.State) *regionstate.State { replica(s, "accounts-db", region).LagMs = ms; return s }
	}
	writer := func(platform, region string) func(s *regionstate.State) *regionstate.State {
		return func(s *regionstate.State) *regionstate.State { plat(s, platform).Writer = region; return s }
	}
	cfgAt := func(region string, e, q uint64) func(s *regionstate.State) *regionstate.State {
		return func(s *regionstate.State) *regionstate.State {
			regionLookup(s, region).ConfigVersion = envelope.Version{Epoch: e, Sequence: q}
			return s
		}
	}
	both := func(fs ...func(s *regionstate.State) *regionstate.State) func(s *regionstate.State) *regionstate.State {
		return func(s *regionstate.State) *regionstate.State {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}
	}
	cases := []tc{
		// fixed (acme, eu-west), reads
		{name: "fixed read healthy", tenant: "acme", route: "get-account", reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read primary down", tenant: "acme", route: "get-account", state: down("eu-west"), reason: NoHealthyRegion},
		{name: "fixed read primary draining", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State { region(s, "eu-west").Draining = true; return s }, reason: NoHealthyRegion},
		{name: "fixed read other region down is irrelevant", tenant: "acme", route: "get-account", state: down("us-east"), reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read lag at the bound", tenant: "acme", route: "get-account", state: lag("eu-west", 500), reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read lag over the bound", tenant: "acme", route: "get-account", state: lag("eu-west", 501), reason: ReplicaLag},
		{name: "fixed read lag unknown", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State { dropReplica(s, "accounts-db", "eu-west"); return s }, reason: LagUnknown},
		{name: "fixed read lag signal too old", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State {
				replica(s, "accounts-db", "eu-west").ObservedAt = t0.Add(-5001 * time.Millisecond)
				return s
			}, reason: SignalStale},
		{name: "fixed read lag signal at the bound", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State {
				replica(s, "accounts-db", "eu-west").ObservedAt = t0.Add(-5000 * time.Millisecond)
				return s
			}, reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read config one behind (max_config_lag 1)", tenant: "acme", route: "get-account", state: cfgAt("eu-west", 4, 19), reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read config two behind", tenant: "acme", route: "get-account", state: cfgAt("eu-west", 4, 18), reason: ConfigStale},
		{name: "fixed read config of an older epoch", tenant: "acme", route: "get-account", state: cfgAt("eu-west", 3, 99), reason: ConfigStale},
		{name: "fixed read config newer", tenant: "acme", route: "get-account", state: cfgAt("eu-west", 5, 1), reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read config unknown", tenant: "acme", route: "get-account", state: cfgAt("eu-west", 0, 0), reason: ConfigStale},
		{name: "fixed read region absent from the state", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State { s.Regions = s.Regions[:1]; return s }, reason: NoHealthyRegion},
		{name: "no state", tenant: "acme", route: "get-account", state: func(*regionstate.State) *regionstate.State { return nil }, reason: StateUnknown},
		{name: "stale state", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State { s.Created = t0.Add(-30001 * time.Millisecond); return s }, reason: StateUnknown},
		{name: "state from the future", tenant: "acme", route: "get-account",
			state: func(s *regionstate.State) *regionstate.State { s.Created = t0.Add(30001 * time.Millisecond); return s }, reason: StateUnknown},
		{name: "fixed read hint tries to widen", tenant: "acme", route: "get-account", hint: "us-east", reason: HintIgnored, target: "eu-west", targets: "eu-west"},
		{name: "fixed read hint unknown region", tenant: "acme", route: "get-account", hint: "mars", reason: HintIgnored, target: "eu-west", targets: "eu-west"},
		{name: "fixed read hint the only candidate", tenant: "acme", route: "get-account", hint: "eu-west", reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed read primary down, hint cannot move it", tenant: "acme", route: "get-account", state: down("eu-west"), hint: "us-east", reason: NoHealthyRegion},
		{name: "unknown tenant", tenant: "nobody", route: "get-account", reason: NoTenant},
		{name: "no tenant", tenant: "", route: "get-account", reason: NoTenant},
		{name: "tenant without a region of the route", tenant: "hooli", route: "post-ledger", reason: RegionNotAllowed},

		// primary_backup (globex: eu-west, backup eu-central), reads
		{name: "pb read healthy", tenant: "globex", route: "get-account", reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "pb read primary down", tenant: "globex", route: "get-account", state: down("eu-west"), reason: OKBackup, target: "eu-central", targets: "eu-central"},
		{name: "pb read primary lagging", tenant: "globex", route: "get-account", state: lag("eu-west", 900), reason: OKBackup, target: "eu-central", targets: "eu-central"},
		{name: "pb read both down: the primary's reason", tenant: "globex", route: "get-account", state: both(lag("eu-west", 900), down("eu-central")), reason: ReplicaLag},
		{name: "pb read primary down, hint back to it ignored", tenant: "globex", route: "get-account", state: down("eu-west"), hint: "eu-west", reason: HintIgnored, target: "eu-central", targets: "eu-central"},
		{name: "pb read hint outside allowed ignored", tenant: "globex", route: "get-account", state: down("eu-west"), hint: "us-east", reason: HintIgnored, target: "eu-central", targets: "eu-central"},
		{name: "pb read healthy, hint to the backup ignored", tenant: "globex", route: "get-account", hint: "eu-central", reason: HintIgnored, target: "eu-west", targets: "eu-west"},

		// weighted (initech: us-east 2, eu-west 1, eu-central 1), reads;
		// effective weights 100/100/200 in index order eu-central, eu-west, us-east
		{name: "weighted read roll 0", tenant: "initech", route: "get-account", roll: 0, reason: OKWeighted, target: "eu-central", targets: "eu-central|eu-west|us-east"},
		{name: "weighted read roll 150", tenant: "initech", route: "get-account", roll: 150, reason: OKWeighted, target: "eu-west", targets: "eu-central|eu-west|us-east"},
		{name: "weighted read roll 399", tenant: "initech", route: "get-account", roll: 399, reason: OKWeighted, target: "us-east", targets: "eu-central|eu-west|us-east"},
		{name: "weighted read roll wraps", tenant: "initech", route: "get-account", roll: 400, reason: OKWeighted, target: "eu-central", targets: "eu-central|eu-west|us-east"},
		{name: "weighted read us-east lagging", tenant: "initech", route: "get-account", state: lag("us-east", 700), roll: 399, reason: OKWeighted, target: "eu-west", targets: "eu-central|eu-west"},
		{name: "weighted read hint narrows", tenant: "initech", route: "get-account", hint: "eu-west", reason: HintNarrowed, target: "eu-west", targets: "eu-west"},
		{name: "weighted read hint to a lagging region ignored", tenant: "initech", route: "get-account", state: lag("eu-west", 700), hint: "eu-west", roll: 0, reason: HintIgnored, target: "eu-central", targets: "eu-central|us-east"},
		{name: "weighted read all lagging: the primary's reason", tenant: "initech", route: "get-account",
			state: both(lag("us-east", 700), down("eu-west"), cfgAt("eu-central", 1, 1)), reason: ReplicaLag},
		{name: "weighted without weights: own region", tenant: "umbrella", route: "get-account", local: "eu-west", roll: 0, reason: OKWeighted, target: "eu-west", targets: "eu-central|eu-west"},
		{name: "weighted without weights: elsewhere, even", tenant: "umbrella", route: "get-account", local: "us-east", roll: 150, reason: OKWeighted, target: "eu-west", targets: "eu-central|eu-west"},
		{name: "weighted without weights: own region not allowed", tenant: "umbrella", route: "get-account", local: "us-east", roll: 0, reason: OKWeighted, target: "eu-central", targets: "eu-central|eu-west"},

		// writes
		{name: "fixed write to the writer", tenant: "acme", route: "update-account", reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed write ignores lag", tenant: "acme", route: "update-account", state: lag("eu-west", 90000), reason: OKPrimary, target: "eu-west", targets: "eu-west"},
		{name: "fixed write, writer elsewhere", tenant: "acme", route: "update-account", state: writer("accounts-db", "eu-central"), reason: RegionNotAllowed},
		{name: "write, writer unknown", tenant: "acme", route: "update-account", state: writer("accounts-db", ""), reason: WriterUnknown},
		{name: "write, writer not a region of the policy", tenant: "acme", route: "update-account", state: writer("accounts-db", "ap-south"), reason: WriterUnknown},
		{name: "write, writer down", tenant: "acme", route: "update-account", state: down("eu-west"), reason: NoHealthyRegion},
		{name: "write, writer config stale", tenant: "acme", route: "update-account", state: cfgAt("eu-west", 4, 10), reason: ConfigStale},
		{name: "write hint to another region ignored", tenant: "acme", route: "update-account", hint: "eu-central", reason: HintIgnored, target: "eu-west", targets: "eu-west"},
		{name: "pb write moved to the backup without guarantees", tenant: "globex", route: "update-account", state: writer("accounts-db", "eu-central"), reason: CrossRegionWriteUnsafe},
		{name: "pb write moved to the backup with guarantees", tenant: "globex", route: "post-ledger", state: writer("ledger-db", "eu-central"), reason: OKBackup, target: "eu-central", targets: "eu-central"},
		{name: "pb write moved outside primary and backup", tenant: "globex", route: "update-account", state: writer("accounts-db", "us-east"), reason: RegionNotAllowed},
		{name: "pb write, backup writer down", tenant: "globex", route: "post-ledger", state: both(writer("ledger-db", "eu-central"), down("eu-central")), reason: NoHealthyRegion},
		{name: "weighted write to its primary", tenant: "initech", route: "update-account", state: writer("accounts-db", "us-east"), reason: OKPrimary, target: "us-east", targets: "us-east"},
		{name: "weighted write is not spread, and unsafe elsewhere", tenant: "initech", route: "update-account", reason: CrossRegionWriteUnsafe},
		{name: "weighted write elsewhere with guarantees", tenant: "initech", route: "post-ledger", reason: OKBackup, target: "eu-west", targets: "eu-west"},
		{name: "write, no state", tenant: "acme", route: "update-account", state: func(*regionstate.State) *regionstate.State { return nil }, reason: StateUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := healthyState()
			if c.state != nil {
				s = c.state(s)
			}
			v := NewTracker(func() time.Time { return t0 }).View(p, s)
			rule := p.Rule(c.route)
			if rule == nil {
				t.Fatalf("no rule for route %q", c.route)
			}
			in := Input{Tenant: c.tenant, Hint: c.hint, Local: p.Index(c.local), Now: t0.UnixNano(), Roll: c.roll}
			var d Decision
			v.Decide(rule, &in, &d)
			if d.Reason != c.reason || p.Name(d.Target) != c.target || p.Names(d.Candidates, "|") != c.targets {
				t.Errorf("got %s target %q candidates %q; want %s target %q candidates %q",
					d.Reason, p.Name(d.Target), p.Names(d.Candidates, "|"), c.reason, c.target, c.targets)
			}
			if d.Reason.OK() != (d.Target >= 0) || d.Reason.OK() && !d.Candidates.Has(d.Target) {
				t.Errorf("inconsistent decision %+v", d)
			}
			if rule.Write() && d.Candidates.Len() > 1 {
				t.Errorf("a write has %d candidate regions", d.Candidates.Len())
			}
		})
	}
}

// regionLookup is region() for closures whose parameter shadows it.
func regionLookup(s *regionstate.State, name string) *regionstate.Region { return region(s, name) }

func TestRouteWithoutPlatformHasNoRule(t *testing.T) {
	p, _ := loadPolicy(t, nil)
	if p.Rule("status") != nil {
		t.Error("route status has no platform but got a rule")
	}
	if p.Rule("get-account") == nil || p.Rule("get-account").Write() || !p.Rule("update-account").Write() {
		t.Error("rules of the platform routes are missing or have the wrong class")
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		n := r.String()
		if n == "unknown" || seen[n] {
			t.Errorf("reason %d has name %q (missing or duplicate)", r, n)
		}
		seen[n] = true
		if back, ok := ParseReason(n); !ok || back != r {
			t.Errorf("ParseReason(%q) = %v, %v", n, back, ok)
		}
	}
	if len(seen) != int(numReasons) {
		t.Errorf("%d reasons named, want %d", len(seen), numReasons)
	}
}

func TestDecideAllocatesNothing(t *testing.T) {
	p, _ := loadPolicy(t, nil)
	v := NewTracker(func() time.Time { return t0 }).View(p, healthyState())
	rules := []*Rule{p.Rule("get-account"), p.Rule("update-account"), p.Rule("post-ledger")}
	tenants := []string{"acme", "globex", "initech", "umbrella", "nobody"}
	var d Decision
	n := 0
	allocs := testing.AllocsPerRun(200, func() {
		in := Input{Tenant: tenants[n%len(tenants)], Hint: "eu-west", Local: 1, Now: t0.UnixNano(), Roll: uint32(n * 37)}
		v.Decide(rules[n%len(rules)], &in, &d)
		n++
	})
	if allocs != 0 {
		t.Errorf("Decide allocates %.1f times per call, want 0", allocs)
	}
}
