package plane

import (
	"math"

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
	floor := rate * uint64(max(0, min(g.FloorSharePercent, 100))) / 100
	if floor*n > rate {
		floor = rate / n
	}
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

// mulDiv is a*b/c without overflow for the bounded values here (a, b, c
// at most 1e9: the product stays below 2^64).
func mulDiv(a, b, c uint64) uint64 {
	if c == 0 {
		return 0
	}
	return a * b / c
}
