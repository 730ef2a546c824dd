package envelope

// ContentCuts chooses block boundaries from the body's content, so that an
// insertion or removal changes only the blocks around it and the blocks
// after it keep their bytes (and are not hashed again by an incremental
// Open). A cut falls where a rolling gear hash over the last bytes has its
// low bits zero, giving blocks of about avg bytes, never shorter than min
// (except the last) nor longer than max. avg must be a power of two;
// min <= avg <= max. The same body always gets the same cuts.
func ContentCuts(body []byte, min, avg, max int) []int {
	if min < 1 || avg < min || max < avg || avg&(avg-1) != 0 {
		panic("envelope.ContentCuts: want 1 <= min <= avg <= max and avg a power of two")
	}
	mask := uint64(avg - 1)
	var cuts []int
	start := 0
	for start+min < len(body) {
		end := start + max
		if end > len(body) {
			end = len(body)
		}
		cut := end
		var h uint64
		for i := start + min; i < end; i++ {
			h = h<<1 + gear[body[i]]
			if h&mask == 0 {
				cut = i + 1
				break
			}
		}
		if cut >= len(body) {
			break
		}
		cuts = append(cuts, cut)
		start = cut
	}
	return cuts
}

// gear holds one fixed pseudo-random word per byte value (splitmix64 from
// seed 0): part of the format, since it decides where builders cut.
var gear = func() (g [256]uint64) {
	var x uint64
	for i := range g {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		g[i] = z ^ z>>31
	}
	return g
}()
