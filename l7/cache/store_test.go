package cache

import (
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
