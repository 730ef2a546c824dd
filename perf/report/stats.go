package main

import (
	"fmt"
	"math"
	"slices"
)

// Spread is the median and range of one figure over the rounds.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// SpreadOf returns the median (mean of the middle two for an even count),
// min and max; NaN and infinite values are left out, and no values give a
// zero Spread with N 0.
func SpreadOf(vs []float64) Spread {
	var ok []float64
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			ok = append(ok, v)
		}
	}
	if len(ok) == 0 {
		return Spread{}
	}
	slices.Sort(ok)
	n := len(ok)
	m := ok[n/2]
	if n%2 == 0 {
		m = (ok[n/2-1] + ok[n/2]) / 2
	}
	return Spread{Median: m, Min: ok[0], Max: ok[n-1], N: n}
}

// ratio is a/b, or 0 when b is 0 (never NaN or Inf).
func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return 0
	}
	r := a / b
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return 0
	}
	return r
}

// Point is one offered rate of a series, for the capacity search.
type Point struct {
	Rate      float64 // offered req/s
	P99ms     float64 // median p99 over the rounds
	Failed    int64   // non-2xx, errors and overload over all rounds
	Delivered float64 // median achieved req/s / offered (1 = kept up)
}

// Capacity is the Q figure: the highest offered rate of the series whose
// p99 stays under the target with no failed request and at least 95 % of
// the offered rate delivered.
type Capacity struct {
	Series      string  `json:"series"`        // e.g. "h1 ka chain"
	TargetP99ms float64 `json:"target_p99_ms"` // the p99 target
	Q           float64 `json:"q"`             // req/s per instance; 0 when no rate met the target
	// Bound: "exact" (a higher measured rate missed the target), "at least"
	// (every measured rate met it: Q is a lower bound) or "below" (even the
	// lowest measured rate missed it: Q < that rate).
	Bound  string  `json:"bound"`
	Lowest float64 `json:"lowest_rate"`
	Why    string  `json:"why"` // the first rate that missed and why, or ""
}

// CapacityOf finds Q among points (any order).
func CapacityOf(series string, target float64, pts []Point) Capacity {
	c := Capacity{Series: series, TargetP99ms: target}
	ps := slices.Clone(pts)
	slices.SortFunc(ps, func(a, b Point) int { return int(math.Copysign(1, a.Rate-b.Rate)) })
	if len(ps) == 0 {
		c.Bound, c.Why = "below", "no measured rates"
		return c
	}
	c.Lowest = ps[0].Rate
	for _, p := range ps {
		var why string
		switch {
		case p.Failed > 0:
			why = fmt.Sprintf("%d failed requests", p.Failed)
		case p.P99ms >= target:
			why = fmt.Sprintf("p99 %.1f ms >= %.0f ms", p.P99ms, target)
		case p.Delivered < 0.95:
			why = fmt.Sprintf("delivered %.0f %% of the offered rate", 100*p.Delivered)
		}
		if why != "" {
			c.Why = fmt.Sprintf("%.0f req/s: %s", p.Rate, why)
			if c.Q == 0 {
				c.Bound = "below"
			} else {
				c.Bound = "exact"
			}
			return c
		}
		c.Q = p.Rate
	}
	c.Bound = "at least"
	return c
}

// Sizing is the fleet that Q implies.
type Sizing struct {
	TotalRPS          float64  `json:"total_rps"`            // 500,000
	Regions           int      `json:"regions"`              // 3
	RegionsLost       int      `json:"regions_lost"`         // 1
	Headroom          float64  `json:"headroom"`             // 0.30: the share of Q kept free
	Q                 float64  `json:"q"`                    // req/s per instance
	PerRegionRPS      float64  `json:"per_region_rps"`       // TotalRPS / (Regions - RegionsLost)
	UsablePerInstance float64  `json:"usable_per_instance"`  // Q × (1 − Headroom)
	PerRegion         int      `json:"instances_per_region"` // ceil(PerRegionRPS / usable) + 1 (N+1)
	Fleet             int      `json:"fleet"`                // Regions × PerRegion
	Steps             []string `json:"steps"`                // the arithmetic, one line each
}

// SizingFor applies the formula; it refuses inputs that give no finite answer.
func SizingFor(total float64, regions, lost int, headroom, q float64) (Sizing, error) {
	s := Sizing{TotalRPS: total, Regions: regions, RegionsLost: lost, Headroom: headroom, Q: q}
	switch {
	case !(total > 0) || math.IsInf(total, 0):
		return s, fmt.Errorf("sizing: total %v req/s: want > 0", total)
	case regions < 1 || lost < 0 || lost >= regions:
		return s, fmt.Errorf("sizing: %d regions with %d lost: want 0 <= lost < regions", regions, lost)
	case !(headroom >= 0 && headroom < 1):
		return s, fmt.Errorf("sizing: headroom %v: want 0 <= headroom < 1", headroom)
	case !(q > 0) || math.IsInf(q, 0):
		return s, fmt.Errorf("sizing: Q %v req/s: want > 0 (no measured rate met the p99 target)", q)
	}
	left := regions - lost
	s.PerRegionRPS = total / float64(left)
	s.UsablePerInstance = q * (1 - headroom)
	n := int(math.Ceil(s.PerRegionRPS / s.UsablePerInstance))
	s.PerRegion = n + 1
	s.Fleet = regions * s.PerRegion
	s.Steps = []string{
		fmt.Sprintf("one region lost: %s req/s over %d regions = %s req/s per region", num(total), left, num(s.PerRegionRPS)),
		fmt.Sprintf("usable per instance: Q × (1 − headroom) = %s × %.2f = %s req/s", num(q), 1-headroom, num(s.UsablePerInstance)),
		fmt.Sprintf("per region: ceil(%s / %s) = %d, + 1 (N+1) = %d instances", num(s.PerRegionRPS), num(s.UsablePerInstance), n, s.PerRegion),
		fmt.Sprintf("fleet: %d regions × %d = %d instances", regions, s.PerRegion, s.Fleet),
	}
	return s, nil
}

// num formats a figure with thousands separators; below 100, one decimal
// when it has a fraction.
func num(v float64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if v < 100 && v != math.Trunc(v) {
		return sign + fmt.Sprintf("%.1f", v)
	}
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}
