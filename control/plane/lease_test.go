package plane

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestAllocate(t *testing.T) {
	g := snapshot.Global{RatePerSecond: 500_000, Burst: 50_000, FloorSharePercent: 10}
	three := []string{"ap", "eu", "us"}
	cases := []struct {
		name    string
		g       snapshot.Global
		regions []string
		demand  map[string]float64
		rates   []uint64
		bursts  []uint64
	}{
		{"no regions", g, nil, nil, nil, nil},
		{"no demand: equal parts, the rest to the first", g, three, nil,
			[]uint64{166_668, 166_666, 166_666}, []uint64{16_666, 16_666, 16_666}},
		{"one region's demand takes all but the floors", g, three, map[string]float64{"eu": 1000},
			[]uint64{50_000, 400_000, 50_000}, []uint64{5000, 40_000, 5000}},
		{"by demand", g, three, map[string]float64{"ap": 100_000, "eu": 300_000, "us": 100_000},
			[]uint64{120_000, 260_000, 120_000}, []uint64{12_000, 26_000, 12_000}},
		{"bad demands count zero", g, three, map[string]float64{"ap": math.NaN(), "eu": math.Inf(1), "us": -5},
			[]uint64{166_668, 166_666, 166_666}, []uint64{16_666, 16_666, 16_666}},
		{"floors above the rate shrink", snapshot.Global{RatePerSecond: 10, Burst: 1, FloorSharePercent: 50}, three, map[string]float64{"us": 1},
			[]uint64{3, 3, 4}, []uint64{1, 1, 1}},
		{"rest to the largest demand", snapshot.Global{RatePerSecond: 10, Burst: 10}, three, map[string]float64{"ap": 1, "eu": 1, "us": 1},
			[]uint64{4, 3, 3}, []uint64{4, 3, 3}},
		{"floor 100 over one region", snapshot.Global{RatePerSecond: 7, Burst: 3, FloorSharePercent: 100}, []string{"eu"}, nil,
			[]uint64{7}, []uint64{3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := allocate(tc.g, tc.regions, tc.demand)
			var rates, bursts []uint64
			for _, l := range got {
				rates, bursts = append(rates, l.PerSecond), append(bursts, l.Burst)
			}
			if !slices.Equal(rates, tc.rates) || !slices.Equal(bursts, tc.bursts) {
				t.Fatalf("allocate = rates %v bursts %v, want %v %v", rates, bursts, tc.rates, tc.bursts)
			}
		})
	}
}

// Property: for any budget, floor, regions and demands, the leases sum to
// exactly the global rate (never above), each is at least the floor (as
// allocate shrinks it), bursts are at least 1 and sum to at most the
// global burst plus one per region, and more demand never means a
// smaller lease than a region with less; and limitGrowth never lets the
// new leases and the ones still held exceed the rate together.
func TestAllocateProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 13))
	for i := range 20_000 {
		g := snapshot.Global{RatePerSecond: 1 + rng.Uint64N(1_000_000_000), Burst: 1 + rng.Uint64N(1_000_000_000),
			FloorSharePercent: rng.IntN(101)}
		if i%3 == 0 {
			g.RatePerSecond = 1 + rng.Uint64N(20)
		}
		n := 1 + rng.IntN(8)
		regions := make([]string, n)
		demand := map[string]float64{}
		for r := range regions {
			regions[r] = string(rune('a' + r))
			switch rng.IntN(4) {
			case 0:
			case 1:
				demand[regions[r]] = rng.Float64() * 1e6
			case 2:
				demand[regions[r]] = float64(rng.IntN(3))
			default:
				demand[regions[r]] = rng.Float64() * 1e12
			}
		}
		got := allocate(g, regions, demand)
		floor := min(g.RatePerSecond*uint64(g.FloorSharePercent)/100, g.RatePerSecond/uint64(n))
		var sum, bursts uint64
		for r, l := range got {
			sum += l.PerSecond
			bursts += l.Burst
			if l.PerSecond < floor || l.Burst < 1 {
				t.Fatalf("case %d %+v %v: region %s lease %+v below the floor %d or burst 1", i, g, demand, regions[r], l, floor)
			}
			for o := range got {
				if demand[regions[o]] > demand[regions[r]]+1e-9*demand[regions[o]] && got[o].PerSecond+1 < l.PerSecond && o != r {
					t.Fatalf("case %d %+v %v: region %s with more demand got %d < %d", i, g, demand, regions[o], got[o].PerSecond, l.PerSecond)
				}
			}
		}
		if sum != g.RatePerSecond {
			t.Fatalf("case %d %+v %v: leases sum to %d, want exactly %d", i, g, demand, sum, g.RatePerSecond)
		}
		if bursts > g.Burst+uint64(n) {
			t.Fatalf("case %d %+v: bursts sum to %d, above %d + %d", i, g, bursts, g.Burst, n)
		}
		// Break before make: with each region still holding some earlier
		// grant (and some region not leased any more holding one too), the
		// leases that may be in force, max(new, held), never sum above the
		// rate (nor above what was held, when that already was), a region
		// never gets more than it wants, and one that shrinks gets its want.
		held := make([]uint64, n)
		var heldSum uint64
		for r := range held {
			held[r] = rng.Uint64N(g.RatePerSecond/uint64(n) + 2)
			heldSum += held[r]
		}
		other := rng.Uint64N(g.RatePerSecond - min(heldSum, g.RatePerSecond) + 1)
		want := make([]uint64, n)
		for r, l := range got {
			want[r] = l.PerSecond
		}
		limited := limitGrowth(g.RatePerSecond, want, held, other)
		inForce := other
		for r := range limited {
			inForce += max(limited[r], held[r])
			if limited[r] > want[r] || (want[r] <= held[r] && limited[r] != want[r]) || (want[r] > held[r] && limited[r] < held[r]) {
				t.Fatalf("case %d %+v: region %s wants %d, holds %d: granted %d", i, g, regions[r], want[r], held[r], limited[r])
			}
		}
		if inForce > max(g.RatePerSecond, heldSum+other) {
			t.Fatalf("case %d %+v: held %v (+%d elsewhere), wanted %v: granted %v, %d in force, above %d", i, g, held, other, want, limited, inForce, g.RatePerSecond)
		}
	}
}

// Demand shifts from eu to us between two rebalances: the leases follow
// it, the node counts are the fresh ready nodes, stale reports do not
// count, and every lease expires one TTL after its grant.
func TestLeasesForDemandShift(t *testing.T) {
	q := &snapshot.QuotaPolicy{ID: "api", Global: &snapshot.Global{RatePerSecond: 500_000, Burst: 50_000,
		FloorSharePercent: 10, LeaseTTLMs: 10_000, RebalanceMs: 2000}}
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	node := func(id, region string, ready bool, seen time.Time, demand float64) model.Node {
		return model.Node{Status: model.Status{Identity: model.Identity{NodeID: id, Region: region}, Ready: ready,
			QuotaDemand: []model.QuotaDemand{{Policy: "api", PerSecond: demand}, {Policy: "other", PerSecond: 1e9}}}, SeenAt: seen}
	}
	before := []model.Node{
		node("eu1", "eu", true, t0, 200_000), node("eu2", "eu", true, t0, 200_000), node("eu3", "eu", false, t0, 0),
		node("us1", "us", true, t0, 100_000),
		node("ap1", "ap", true, t0.Add(-time.Minute), 1e9), // stale: neither demand nor a node
	}
	got := leasesFor(q, []string{"ap", "eu", "us"}, before, t0, 10*time.Second)
	want := "ap 50000 5000 0|eu 330000 33000 2|us 120000 12000 1"
	if s := leaseString(got); s != want {
		t.Fatalf("before the shift: %s, want %s", s, want)
	}
	for _, l := range got {
		if !l.Expires.Equal(t0.Add(10 * time.Second)) {
			t.Fatalf("%s expires %s, want %s", l.Region, l.Expires, t0.Add(10*time.Second))
		}
	}
	t1 := t0.Add(2 * time.Second)
	after := []model.Node{
		node("eu1", "eu", true, t1, 25_000), node("eu2", "eu", true, t1, 25_000), node("eu3", "eu", true, t1, 0),
		node("us1", "us", true, t1, 350_000), node("us2", "us", true, t1, 50_000),
		node("ap1", "ap", true, t1, 50_000),
	}
	got = leasesFor(q, []string{"ap", "eu", "us"}, after, t1, 10*time.Second)
	want = "ap 85000 8500 1|eu 85000 8500 3|us 330000 33000 2"
	if s := leaseString(got); s != want {
		t.Fatalf("after the shift: %s, want %s", s, want)
	}
	if got[0].Expires != t1.Add(10*time.Second) {
		t.Fatalf("renewed lease expires %s, want %s", got[0].Expires, t1.Add(10*time.Second))
	}
	// A region only a node names is leased too; one no one names is not.
	got = leasesFor(q, nil, after[:3], t1, 10*time.Second)
	if s := leaseString(got); s != "eu 500000 50000 3" {
		t.Fatalf("regions from nodes only: %s", s)
	}
}

func leaseString(ls []regionstate.QuotaLease) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(l.Region + " " + strconv.FormatUint(l.PerSecond, 10) + " " + strconv.FormatUint(l.Burst, 10) + " " + strconv.FormatUint(l.Nodes, 10))
	}
	return b.String()
}

func TestCheckQuotaDemand(t *testing.T) {
	ok := model.Status{QuotaDemand: []model.QuotaDemand{{Policy: "b", PerSecond: 2}, {Policy: "a", PerSecond: 0}}}
	if err := checkQuotaDemand(&ok); err != nil || ok.QuotaDemand[0].Policy != "a" {
		t.Fatalf("checkQuotaDemand(valid) = %v, order %v", err, ok.QuotaDemand)
	}
	for _, bad := range []model.QuotaDemand{{Policy: "", PerSecond: 1}, {Policy: "a", PerSecond: -1},
		{Policy: "a", PerSecond: math.NaN()}, {Policy: "a", PerSecond: math.Inf(1)}, {Policy: "a\n", PerSecond: 1}} {
		s := model.Status{QuotaDemand: []model.QuotaDemand{bad}}
		if err := checkQuotaDemand(&s); err == nil {
			t.Errorf("checkQuotaDemand(%+v) accepted it", bad)
		}
	}
	many := model.Status{QuotaDemand: make([]model.QuotaDemand, MaxReportQuotaDemand+1)}
	if err := checkQuotaDemand(&many); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("checkQuotaDemand(%d entries) = %v", len(many.QuotaDemand), err)
	}
}

// Property of break before make: over random fleets (regions of nodes
// that get each document after a random delay or never, apply it up to
// 250 ms later, and report what they hold at random times or not at
// all), demand that jumps between regions, a leader that takes over from
// an unknown one, and a control plane that stops, at every instant the
// sum over regions of the largest lease any of its proxies enforces is at
// most the global rate; and so is it with the proxies whose lease expired
// (or that have none) enforcing the floor share, since the floors fit
// (floor_share_percent × regions ≤ 100).
func TestLeaseBookProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 26))
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	const step = 50 * time.Millisecond
	type doc struct {
		s  *regionstate.State
		at time.Time // when the node client hands it over
	}
	type node struct {
		region             string
		queue              []doc
		handed             *regionstate.State // what the node client reports
		applied            *regionstate.State // what the proxy enforces
		applyAt            time.Time
		pendingApply       *regionstate.State
		nextReport         time.Time
		reportEvery        time.Duration
		lossy, late, quiet bool
		reported           string // the version in its last report
		seen               time.Time
	}
	for trial := range 150 {
		n := 1 + rng.IntN(4)
		g := snapshot.Global{RatePerSecond: 100 + rng.Uint64N(1_000_000), Burst: 1 + rng.Uint64N(100_000),
			FloorSharePercent: rng.IntN(100/n + 1), LeaseTTLMs: 1000 * (1 + rng.IntN(10))}
		g.RebalanceMs = 100 + rng.IntN(g.LeaseTTLMs/2-99)
		q := &snapshot.QuotaPolicy{ID: "api", Global: &g}
		ttl := leaseTTL(&g)
		regions := make([]string, n)
		for i := range regions {
			regions[i] = string(rune('a' + i))
		}
		fallback := g.RatePerSecond * uint64(g.FloorSharePercent) / 100
		// The last leader's document: leases by some demand, granted up to
		// a TTL before this leader began.
		prevDemand := map[string]float64{}
		for _, r := range regions {
			prevDemand[r] = rng.Float64() * 1000
		}
		prev := &regionstate.State{Version: envelope.Version{Epoch: 1, Sequence: 1}}
		prevAt := t0.Add(-time.Duration(rng.Int64N(int64(ttl))))
		for i, l := range allocate(g, regions, prevDemand) {
			prev.QuotaLeases = append(prev.QuotaLeases, regionstate.QuotaLease{Policy: "api", Region: regions[i], PerSecond: l.PerSecond, Burst: l.Burst, Expires: prevAt.Add(ttl)})
		}
		var nodes []*node
		for _, r := range regions {
			for range 1 + rng.IntN(3) {
				nd := &node{region: r, reportEvery: time.Duration(1+rng.IntN(20)) * step,
					lossy: rng.IntN(4) == 0, late: rng.IntN(3) == 0, quiet: rng.IntN(5) == 0}
				if rng.IntN(4) != 0 {
					nd.handed, nd.applied = prev, prev
				}
				nodes = append(nodes, nd)
			}
		}
		book := newLeaseBook(2, t0)
		seq := uint64(0)
		stop := t0.Add(time.Duration(20+rng.IntN(40)) * time.Second)
		demand := map[string]float64{}
		for now := t0; now.Before(stop.Add(2*ttl + 2*time.Second)); now = now.Add(step) {
			if rng.IntN(40) == 0 { // demand jumps to one region
				hot := regions[rng.IntN(n)]
				for _, r := range regions {
					demand[r] = rng.Float64() * 10
				}
				demand[hot] = 1000 + rng.Float64()*1e6
			}
			var reports []model.Node
			for i, nd := range nodes {
				for len(nd.queue) > 0 && !nd.queue[0].at.After(now) {
					if nd.handed == nil || nd.handed.Version.Less(nd.queue[0].s.Version) {
						nd.handed = nd.queue[0].s
						nd.pendingApply, nd.applyAt = nd.handed, now.Add(time.Duration(rng.Int64N(int64(250*time.Millisecond))))
					}
					nd.queue = nd.queue[1:]
				}
				if nd.pendingApply != nil && !nd.applyAt.After(now) {
					nd.applied, nd.pendingApply = nd.pendingApply, nil
				}
				if !nd.quiet && !now.Before(nd.nextReport) { // a quiet node never reports
					nd.nextReport, nd.seen, nd.reported = now.Add(nd.reportEvery), now, ""
					if nd.handed != nil {
						nd.reported = nd.handed.Version.String()
					}
				}
				reports = append(reports, model.Node{Status: model.Status{Identity: model.Identity{NodeID: strconv.Itoa(i), Region: nd.region},
					Ready: true, RegionState: nd.reported, QuotaDemand: []model.QuotaDemand{{Policy: "api", PerSecond: demand[nd.region]}}},
					SeenAt: nd.seen})
			}
			if now.Before(stop) {
				book.observe(reports, now)
				if pb := book.policies["api"]; pb == nil || !now.Before(pb.due) {
					got := book.grant(q, regions, reports, now, time.Hour)
					seq++
					s := &regionstate.State{Version: envelope.Version{Epoch: 2, Sequence: seq}, QuotaLeases: got}
					book.published(s.Version, s)
					for _, nd := range nodes {
						if nd.lossy && rng.IntN(2) == 0 {
							continue
						}
						d := time.Duration(rng.Int64N(int64(200 * time.Millisecond)))
						if nd.late {
							d = time.Duration(rng.Int64N(int64(3 * ttl)))
						}
						at := now.Add(d)
						if k := len(nd.queue); k > 0 && at.Before(nd.queue[k-1].at) {
							at = nd.queue[k-1].at
						}
						nd.queue = append(nd.queue, doc{s, at})
					}
				}
			}
			var leases, withFloor uint64
			for _, r := range regions {
				var most, mostF uint64
				for _, nd := range nodes {
					if nd.region != r {
						continue
					}
					rate := fallback
					if nd.applied != nil {
						if l, ok := nd.applied.QuotaLease("api", r); ok && now.Before(l.Expires) {
							rate = l.PerSecond
							most = max(most, rate)
						}
					}
					mostF = max(mostF, rate)
				}
				leases += most
				withFloor += mostF
			}
			if leases > g.RatePerSecond || withFloor > g.RatePerSecond {
				t.Fatalf("trial %d %+v, %d regions, at %s: the leases in force sum to %d (with the floor fallback %d), above %d",
					trial, g, n, now.Sub(t0), leases, withFloor, g.RatePerSecond)
			}
		}
	}
}

// The book step by step: eu's lease shrinks and us's growth waits until
// every ready eu node reports a document with the smaller lease and the
// slack passed (then the policy is due at once); a new book (leader
// change) grants only floors for one TTL.
func TestLeaseBookBreakBeforeMake(t *testing.T) {
	g := snapshot.Global{RatePerSecond: 1000, Burst: 100, FloorSharePercent: 10, LeaseTTLMs: 10_000, RebalanceMs: 2000}
	q := &snapshot.QuotaPolicy{ID: "api", Global: &g}
	regions := []string{"eu", "us"}
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	reports := func(now time.Time, euVer string, eu, us float64) []model.Node {
		n := func(id, r, ver string, d float64) model.Node {
			return model.Node{Status: model.Status{Identity: model.Identity{NodeID: id, Region: r}, Ready: true, RegionState: ver,
				QuotaDemand: []model.QuotaDemand{{Policy: "api", PerSecond: d}}}, SeenAt: now}
		}
		return []model.Node{n("eu1", "eu", euVer, eu/2), n("eu2", "eu", euVer, eu/2), n("us1", "us", "", us)}
	}
	rates := func(ls []regionstate.QuotaLease) string { return leaseString(ls) }

	book := newLeaseBook(3, t0.Add(-10*time.Second)) // led for a TTL already
	if got := rates(book.grant(q, regions, reports(t0, "", 900, 100), t0, time.Minute)); got != "eu 820 82 2|us 180 18 1" {
		t.Fatalf("first grant: %s", got)
	}
	v1 := envelope.Version{Epoch: 3, Sequence: 1}
	s1 := &regionstate.State{Version: v1, QuotaLeases: book.policies["api"].granted}
	book.published(v1, s1)
	// The demand moves to us: eu shrinks at once, us stays where it was.
	t1 := t0.Add(2 * time.Second)
	if got := rates(book.grant(q, regions, reports(t1, v1.String(), 100, 900), t1, time.Minute)); got != "eu 180 18 2|us 180 18 1" {
		t.Fatalf("after the shift: %s, want eu shrunk and us held back", got)
	}
	v2 := envelope.Version{Epoch: 3, Sequence: 2}
	book.published(v2, &regionstate.State{Version: v2, QuotaLeases: book.policies["api"].granted})
	// One eu node still holds v1: nothing frees.
	mixed := reports(t1.Add(100*time.Millisecond), v2.String(), 100, 900)
	mixed[1].RegionState = v1.String()
	if book.observe(mixed, t1.Add(500*time.Millisecond)) {
		t.Fatal("a node of eu still holds the larger lease, yet the book freed it")
	}
	// Both hold v2 from t1+0.6 s on: free once the slack passed, not
	// before, and before the next rebalance was due.
	held := t1.Add(600 * time.Millisecond)
	if book.observe(reports(held, v2.String(), 100, 900), held) {
		t.Fatal("freed at the report, before the slack")
	}
	if !book.observe(reports(held, v2.String(), 100, 900), held.Add(leaseSlack)) {
		t.Fatal("not freed one slack after every eu node held the smaller lease")
	}
	t2 := held.Add(leaseSlack)
	if pb := book.policies["api"]; pb.due.After(t2) {
		t.Fatalf("due %s, want at once (%s)", pb.due, t2)
	}
	if got := rates(book.grant(q, regions, reports(t2, v2.String(), 100, 900), t2, time.Minute)); got != "eu 180 18 2|us 820 82 1" {
		t.Fatalf("after eu's old lease stopped counting: %s", got)
	}

	// A new leader: floors only until one TTL after it began, then the split.
	taken := newLeaseBook(4, t2)
	if got := rates(taken.grant(q, regions, reports(t2, "", 100, 900), t2, time.Minute)); got != "eu 100 10 2|us 100 10 1" {
		t.Fatalf("new leader: %s, want the floors", got)
	}
	if pb := taken.policies["api"]; !pb.due.Equal(t2.Add(2 * time.Second)) {
		t.Fatalf("new leader's next rebalance %s", pb.due)
	}
	at := t2.Add(9 * time.Second)
	if got := rates(taken.grant(q, regions, reports(at, "", 100, 900), at, time.Minute)); got != "eu 100 10 2|us 100 10 1" || !taken.policies["api"].due.Equal(t2.Add(10*time.Second)) {
		t.Fatalf("new leader 9 s in: %s, due %s; want the floors, due at 10 s", got, taken.policies["api"].due)
	}
	at = t2.Add(10 * time.Second)
	if got := rates(taken.grant(q, regions, reports(at, "", 100, 900), at, time.Minute)); got != "eu 180 18 2|us 820 82 1" {
		t.Fatalf("new leader one TTL in: %s, want the split", got)
	}
}
