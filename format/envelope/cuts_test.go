package envelope

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestContentCuts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 1<<20)
	for i := range body {
		body[i] = byte(rng.IntN(256))
	}
	const min, avg, max = 1 << 10, 8 << 10, 32 << 10
	cuts := ContentCuts(body, min, avg, max)
	if len(cuts) < len(body)/max || len(cuts) > len(body)/min {
		t.Fatalf("%d cuts for %d bytes", len(cuts), len(body))
	}
	prev := 0
	for i, c := range append(cuts, len(body)) {
		if n := c - prev; n > max || (n < min && c != len(body)) {
			t.Fatalf("block %d is %d bytes (bounds %d..%d)", i, n, min, max)
		}
		prev = c
	}
	// An insertion near the start moves the later cuts by its length and
	// keeps the blocks after the next cut or two byte-equal.
	ins := append(append(append([]byte(nil), body[:5000]...), []byte("inserted bytes")...), body[5000:]...)
	cuts2 := ContentCuts(ins, min, avg, max)
	shifted := map[int]bool{}
	for _, c := range cuts2 {
		shifted[c-len("inserted bytes")] = true
	}
	same := 0
	for _, c := range cuts {
		if shifted[c] {
			same++
		}
	}
	if same < len(cuts)-3 {
		t.Errorf("after a 14-byte insertion only %d of %d cuts survived", same, len(cuts))
	}
	if !equalInts(ContentCuts(body, min, avg, max), cuts) {
		t.Error("the same body got other cuts")
	}
	if c := ContentCuts(body[:min], min, avg, max); len(c) != 0 {
		t.Errorf("a body of min bytes got cuts %v", c)
	}
	// Constant input still gets blocks within the bounds.
	flat := bytes.Repeat([]byte{'a'}, 100<<10)
	prev = 0
	for i, c := range append(ContentCuts(flat, min, avg, max), len(flat)) {
		if n := c - prev; n > max || (n < min && c != len(flat)) {
			t.Fatalf("flat body: block %d is %d bytes", i, n)
		}
		prev = c
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
