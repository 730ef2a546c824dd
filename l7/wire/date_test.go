package wire

import (
	"net/http"
	"testing"
	"time"
)

// Date is an IMF-fixdate of about now, and the ticker moves it on.
func TestDate(t *testing.T) {
	before := time.Now().Add(-time.Second).Truncate(time.Second)
	got := Date()
	at, err := http.ParseTime(got)
	if err != nil {
		t.Fatalf("Date() = %q: not an HTTP date: %v", got, err)
	}
	if got != at.UTC().Format(http.TimeFormat) {
		t.Fatalf("Date() = %q, want the IMF-fixdate form %q", got, at.UTC().Format(http.TimeFormat))
	}
	if at.Before(before) {
		t.Fatalf("Date() = %q, more than a second before the call (%s)", got, before)
	}
	deadline := time.Now().Add(20 * time.Second)
	for Date() == got {
		if time.Now().After(deadline) {
			t.Fatalf("Date() still %q after 20 s: the ticker does not move it", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if next, err := http.ParseTime(Date()); err != nil || !next.After(at) {
		t.Fatalf("Date() moved from %q to %q (%v): want a later date", got, Date(), err)
	}
}

// Date is on every response's path: it must not allocate.
func TestDateDoesNotAllocate(t *testing.T) {
	Date()
	if n := testing.AllocsPerRun(1000, func() { _ = Date() }); n != 0 {
		t.Fatalf("Date allocates %.1f times per call, want 0", n)
	}
}

// BenchmarkDate is one call per op:
//
//	go test -run '^$' -bench BenchmarkDate -benchmem ./l7/wire
func BenchmarkDate(b *testing.B) {
	b.ReportAllocs()
	n := 0
	for i := 0; i < b.N; i++ {
		n += len(Date())
	}
	_ = n
}
