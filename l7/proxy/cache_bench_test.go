package proxy

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// BenchmarkCacheHandler: the proxy's request path (as BenchmarkHandler)
// on a route without cache, and on a cached route for a hit and for a
// miss (the upstream answers no-store, so every request goes upstream).
func BenchmarkCacheHandler(b *testing.B) {
	const body = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
	for _, bc := range []struct {
		name  string
		cache bool
		cc    string
	}{
		{"plain", false, ""},
		{"hit", true, "Cache-Control: max-age=3600\r\n"},
		{"miss", true, "Cache-Control: no-store\r\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := newLab(b)
			resp := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + bc.cc + "Content-Length: 100\r\n\r\n" + body
			c := l.config(rawUpstream(b, resp, false))
			r := getRoute("bench", "/bench/{id}", "app")
			if bc.cache {
				r.Cache = &snapshot.RouteCache{}
			}
			c.Routes = []snapshot.Route{r}
			l.apply(c)
			h := &entry{p: l.p, listener: "https"}
			u, _ := url.Parse("https://localhost/bench/42")
			req := (&http.Request{Method: "GET", URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"User-Agent": {"bench"}, "Accept": {"*/*"}}, Host: "localhost",
				RequestURI: "/bench/42", RemoteAddr: "127.0.0.1:5555", Body: http.NoBody}).WithContext(context.Background())
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, req) // the hit case's first request stores the object
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, req)
			}
			if w.h.Get("Content-Type") != "text/plain" {
				b.Fatalf("unexpected response headers %v", w.h)
			}
		})
	}
}
