package proxy

import (
	"net/http"
	"reflect"
	"testing"
)

// Hop-by-hop fields go, with every field the Connection header names
// (any case, any spacing); end-to-end fields stay.
func TestStripHopByHop(t *testing.T) {
	h := http.Header{
		"Connection": {"keep-alive, X-Private ,  x-other", "close"}, "Proxy-Connection": {"keep-alive"},
		"Keep-Alive": {"timeout=5"}, "Te": {"trailers"}, "Transfer-Encoding": {"chunked"}, "Upgrade": {"h2c"},
		"X-Private": {"1"}, "X-Other": {"2"}, "Close": {"3"},
		"Content-Type": {"text/plain"}, "Date": {"x"}, "X-Kept": {"4"},
	}
	stripHopByHop(h)
	want := http.Header{"Content-Type": {"text/plain"}, "Date": {"x"}, "X-Kept": {"4"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("got %v, want %v", h, want)
	}
	empty := http.Header{}
	stripHopByHop(empty)
	if len(empty) != 0 {
		t.Fatalf("empty header became %v", empty)
	}
}

// BenchmarkStripHopByHop: a typical upstream response's fields.
func BenchmarkStripHopByHop(b *testing.B) {
	src := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"96"}, "Server": {"nginx/1.22.1"},
		"Date": {"Thu, 03 Dec 2026 17:18:31 GMT"}, "Connection": {"keep-alive"}}
	h := make(http.Header, 8)
	b.ReportAllocs()
	for range b.N {
		for k, v := range src {
			h[k] = v
		}
		stripHopByHop(h)
	}
}
