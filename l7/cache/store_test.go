package cache

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func obj(body string, h http.Header) *Object {
	if h == nil {
		h = http.Header{}
	}
	return &Object{Status: 200, Header: h, Body: []byte(body), Stored: time.Now(), Lifetime: time.Minute, Route: "r", Target: "h/p"}
}

func TestStoreGetPut(t *testing.T) {
	s := NewStore(1 << 20)
	k := Key("r", "", "h", "/p", "")
	if s.Get(k, http.Header{}) != nil {
		t.Fatal("empty store hit")
	}
	s.Put(k, http.Header{}, obj("a", nil))
	if o := s.Get(k, http.Header{}); o == nil || string(o.Body) != "a" {
		t.Fatalf("got %v", o)
	}
	s.Delete(k, http.Header{})
	if s.Get(k, http.Header{}) != nil {
		t.Fatal("deleted object still there")
	}
}

func TestStoreVary(t *testing.T) {
	s := NewStore(1 << 20)
	k := Key("r", "", "h", "/p", "")
	gz := http.Header{"Accept-Encoding": {"gzip,  br"}}
	s.Put(k, gz, obj("gz", http.Header{"Vary": {"accept-encoding"}}))
	// The same values, written differently, select the same variant.
	if o := s.Get(k, http.Header{"Accept-Encoding": {"GZIP, br"}}); o == nil || string(o.Body) != "gz" {
		t.Fatalf("normalised variant missed: %v", o)
	}
	if o := s.Get(k, http.Header{"Accept-Encoding": {"identity"}}); o != nil {
		t.Fatalf("other variant served: %s", o.Body)
	}
	if o := s.Get(k, http.Header{}); o != nil {
		t.Fatalf("variant served to a request without the field: %s", o.Body)
	}
	s.Put(k, http.Header{}, obj("plain", http.Header{"Vary": {"Accept-Encoding"}}))
	if o := s.Get(k, http.Header{}); o == nil || string(o.Body) != "plain" {
		t.Fatalf("second variant: %v", o)
	}
	if o := s.Get(k, gz); o == nil || string(o.Body) != "gz" {
		t.Fatal("first variant lost")
	}
}

func TestKeyTenantIsolation(t *testing.T) {
	if Key("r", "acme", "h", "/p", "q=1") == Key("r", "globex", "h", "/p", "q=1") {
		t.Fatal("tenants share a key")
	}
	if Key("r", "", "h", "/p", "a") == Key("r", "", "h", "/pa", "") {
		t.Fatal("path and query run together")
	}
}

func TestStoreBoundAndEvictions(t *testing.T) {
	s := NewStore(64 << 10)
	big := strings.Repeat("x", 4<<10)
	for i := 0; i < 200; i++ {
		s.Put(Key("r", "", "h", "/p", string(rune('a'+i%26))+strings.Repeat("y", i)), http.Header{}, obj(big, nil))
	}
	deadline := time.Now().Add(20 * time.Second)
	for (s.Bytes() > 64<<10 || s.Evictions() == 0) && time.Now().Before(deadline) {
		s.c.CleanUp()
		time.Sleep(10 * time.Millisecond)
	}
	if s.Bytes() > 64<<10 {
		t.Fatalf("store holds %d bytes, bound 64 KiB", s.Bytes())
	}
	if s.Evictions() == 0 {
		t.Fatal("no evictions counted")
	}
}

func TestStoreRemove(t *testing.T) {
	s := NewStore(1 << 20)
	a, b := obj("a", nil), obj("b", nil)
	b.Route = "other"
	s.Put("ka", http.Header{}, a)
	s.Put("kb", http.Header{}, b)
	if n := s.Remove(func(o *Object) bool { return o.Route == "r" }); n != 1 {
		t.Fatalf("removed %d, want 1", n)
	}
	if s.Get("ka", http.Header{}) != nil || s.Get("kb", http.Header{}) == nil {
		t.Fatal("wrong object removed")
	}
}

func TestObjectAge(t *testing.T) {
	now := time.Now()
	o := &Object{Stored: now.Add(-10 * time.Second), BaseAge: 5 * time.Second, Lifetime: 20 * time.Second}
	if a := o.Age(now); a != 15*time.Second {
		t.Fatalf("age %v", a)
	}
	if ttl := o.TTL(now); ttl != 5*time.Second {
		t.Fatalf("ttl %v", ttl)
	}
}

// TestPurgeRefusesInFlight: a response fetched before a purge but stored
// after it is refused; one fetched after the purge stores.
func TestPurgeRefusesInFlight(t *testing.T) {
	s := NewStore(1 << 20)
	at := time.Now()
	obj := func(fetched time.Time) *Object {
		return &Object{Status: 200, Header: http.Header{}, Stored: time.Now(), Fetched: fetched, Lifetime: time.Hour, Route: "r"}
	}
	if !s.Put("old", http.Header{}, obj(at.Add(-time.Hour))) {
		t.Fatal("Put refused before any purge")
	}
	sel := func(o *Object) bool { return o.Route == "r" && o.FetchedAt().Before(at) }
	if n := s.Purge(at, sel); n != 1 || s.Get("old", http.Header{}) != nil {
		t.Fatalf("Purge removed %d; old still there: %v", n, s.Get("old", http.Header{}) != nil)
	}
	if s.Put("inflight", http.Header{}, obj(at.Add(-time.Millisecond))) || s.Get("inflight", http.Header{}) != nil {
		t.Fatal("a response fetched before the purge was stored after it")
	}
	if s.PurgeRefused() != 1 {
		t.Fatalf("PurgeRefused = %d, want 1", s.PurgeRefused())
	}
	if !s.Put("later", http.Header{}, obj(at.Add(time.Millisecond))) || s.Get("later", http.Header{}) == nil {
		t.Fatal("a response fetched after the purge was refused")
	}
	other := obj(at.Add(-time.Minute))
	other.Route = "other"
	if !s.Put("other", http.Header{}, other) {
		t.Fatal("the purge refused an object it does not select")
	}
	// Refresh after a 304 is checked too: its Fetched is the 304's request.
	if s.Refresh("old", http.Header{}, obj(at.Add(-time.Second))) {
		t.Fatal("a 304 requested before the purge refreshed a purged object")
	}
}

func TestFetchedAtFallsBackToStored(t *testing.T) {
	st := time.Unix(100, 0)
	if got := (&Object{Stored: st}).FetchedAt(); !got.Equal(st) {
		t.Fatalf("FetchedAt = %v, want Stored %v", got, st)
	}
	f := time.Unix(90, 0)
	if got := (&Object{Stored: st, Fetched: f}).FetchedAt(); !got.Equal(f) {
		t.Fatalf("FetchedAt = %v, want Fetched %v", got, f)
	}
}

func TestPurgeMarksBounded(t *testing.T) {
	s := NewStore(1 << 20)
	now := time.Now()
	for i := range maxPurgeMarks + 50 {
		s.Purge(now, func(o *Object) bool { return o.Route == fmt.Sprint(i) })
	}
	s.mu.Lock()
	n := len(s.purges)
	s.mu.Unlock()
	if n != maxPurgeMarks {
		t.Fatalf("%d marks kept, want %d", n, maxPurgeMarks)
	}
	// Marks older than PurgeMemory go at the next purge.
	s2 := NewStore(1 << 20)
	s2.Purge(now.Add(-2*PurgeMemory), func(*Object) bool { return true })
	s2.Purge(now, func(*Object) bool { return false })
	s2.mu.Lock()
	n = len(s2.purges)
	s2.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d marks after an old one should have gone, want 1", n)
	}
}

func TestMarkPass(t *testing.T) {
	s := NewStore(1 << 20)
	if s.Passing("k") {
		t.Fatal("a fresh store passes a key")
	}
	s.MarkPass("k", time.Minute)
	if !s.Passing("k") || s.Get("k", http.Header{}) != nil {
		t.Fatal("the mark is not seen, or reads as an object")
	}
	s.Put("k", http.Header{}, obj("b", nil))
	if s.Passing("k") || s.Get("k", http.Header{}) == nil {
		t.Fatal("a stored object did not replace the mark")
	}
	s.MarkPass("z", 0)
	if s.Passing("z") {
		t.Fatal("a zero-length mark was kept")
	}
}
