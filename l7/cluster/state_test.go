package cluster

import (
	"testing"
	"time"
)

func TestBackoffIsJitteredAndBounded(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for i := 0; i < 100; i++ {
			d := Backoff(n)
			if d < 0 || d >= 250*time.Millisecond || d >= 25*time.Millisecond<<min(n-1, 4) {
				t.Fatalf("Backoff(%d) = %s", n, d)
			}
		}
	}
}
