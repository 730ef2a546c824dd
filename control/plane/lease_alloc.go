package plane

import (
	"math"
	"slices"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// regionLease is what allocate grants one region of a global policy.
type regionLease struct {
	PerSecond, Burst uint64
}

// allocate splits a global budget g among regions by demand (requests per
// second each region tried to admit; NaN, infinite and negative demands
// count 0). Every region first gets the floor, floor_share_percent of the
// global rate (shrunk to rate/len(regions) when the floors would exceed
// the rate); the rest goes to the regions in proportion to their demand,
// or in equal parts when no region has any, and what integer division
// leaves over goes to the region with the most demand (the first on a
// tie). The rates always sum to at most g.RatePerSecond, and to exactly it
// when there is a region. A region's burst is the global burst scaled by
// its share of the rate, at least 1 (so bursts sum to at most
// g.Burst + len(regions)).
func allocate(g snapshot.Global, regions []string, demand map[string]float64) []regionLease {
	n := uint64(len(regions))
	if n == 0 || g.RatePerSecond == 0 {
		return nil
	}
	rate := g.RatePerSecond
	floor := floorRate(g, len(regions))
	rest := rate - floor*n
	d := make([]float64, n)
	total := 0.0
	for i, r := range regions {
		if v := demand[r]; v > 0 && !math.IsInf(v, 0) {
			d[i] = v
			total += v
		}
	}
	out := make([]regionLease, n)
	var given uint64
	top := 0
	for i := range out {
		var part uint64
		if total > 0 {
			part = uint64(math.Floor(float64(rest) * (d[i] / total)))
		} else {
			part = rest / n
		}
		part = min(part, rest-given) // float rounding never takes more than is left
		out[i].PerSecond = floor + part
		given += part
		if d[i] > d[top] {
			top = i
		}
	}
	out[top].PerSecond += rest - given
	for i := range out {
		out[i].Burst = max(1, mulDiv(g.Burst, out[i].PerSecond, rate))
	}
	return out
}

// floorRate is the floor of each of n regions: floor_share_percent of
// the global rate, shrunk to rate/n when the floors would exceed it.
func floorRate(g snapshot.Global, n int) uint64 {
	floor := g.RatePerSecond * uint64(max(0, min(g.FloorSharePercent, 100))) / 100
	if n > 0 && floor*uint64(n) > g.RatePerSecond {
		floor = g.RatePerSecond / uint64(n)
	}
	return floor
}

// limitGrowth is break before make: region i wants want[i], and the
// largest of its grants still in force is held[i]; other is what regions
// without a new grant still hold. A region at or below what it holds gets
// its want (its held rate keeps counting until the old grant is gone);
// the regions above share what the held rates leave of rate, in
// proportion to how much more they want, never more than they want. So
// other + Σ max(got[i], held[i]) ≤ max(rate, other + Σ held[i]).
func limitGrowth(rate uint64, want, held []uint64, other uint64) []uint64 {
	committed := other
	var need uint64
	for i := range want {
		committed += held[i]
		if want[i] > held[i] {
			need += want[i] - held[i]
		}
	}
	free := uint64(0)
	if rate > committed {
		free = rate - committed
	}
	got := slices.Clone(want)
	if need <= free {
		return got
	}
	for i := range want {
		if want[i] > held[i] {
			got[i] = held[i] + mulDiv(free, want[i]-held[i], need)
		}
	}
	return got
}

// mulDiv is a*b/c without overflow for the bounded values here (a, b, c
// at most 1e9: the product stays below 2^64).
func mulDiv(a, b, c uint64) uint64 {
	if c == 0 {
		return 0
	}
	return a * b / c
}
