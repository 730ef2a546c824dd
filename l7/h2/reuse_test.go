package h2

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// freeStreams is how many finished streams s's connections keep.
func freeStreams(s *Server) (n int, held bool) {
	s.conns.Each(func(c *conn) {
		c.mu.Lock()
		n += len(c.free)
		held = held || c.free != nil
		c.mu.Unlock()
	})
	return n, held
}

func idleWorkers(s *Server) int { return sumConns(s, func(c *conn) int { return c.idleWorkers }) }

// waitFor polls cond until it holds, failing after liveness.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(liveness); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after %v", what, liveness)
		}
	}
}

// TestReusedStreamStartsClean runs two requests one after the other on one
// connection, the second on the stream state the first left: nothing the
// first request or its handler set may show in the second.
func TestReusedStreamStartsClean(t *testing.T) {
	var mu sync.Mutex
	var reqs []*http.Request
	var seen []string
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r)
		seen = append(seen, strings.Join([]string{r.Method, r.URL.String(), r.RequestURI, r.Header.Get("X-A"),
			r.Header.Get("X-Mut"), r.PathValue("p"), r.Header.Get("Cookie"), strings.Join(w.Header().Values("X-Only-First"), ",")}, "|"))
		mu.Unlock()
		if r.Context().Err() != nil {
			t.Errorf("request %s: context already done: %v", r.URL, r.Context().Err())
		}
		if r.URL.Path == "/one" {
			r.Header.Set("X-Mut", "1")
			r.SetPathValue("p", "v")
			r.Form = url.Values{"f": {"1"}}
			r.URL.Path = "/rewritten"
			w.Header().Set("X-Only-First", "1")
			w.WriteHeader(http.StatusTeapot)
		}
		io.WriteString(w, "ok")
	}))
	rc := ts.raw(t)
	rc.handshake()
	rc.getPath(1, "/one?q=1", true, "x-a", "a", "cookie", "c=1", "cookie", "d=2")
	if got := rc.response(1); got != "418" {
		t.Fatalf("first response %s, want 418", got)
	}
	waitFor(t, "the first stream kept for reuse", func() bool { n, _ := freeStreams(ts.s); return n == 1 })
	rc.getPath(3, "/two", true)
	var second *http2.MetaHeadersFrame
	rc.until("second response", func(f http2.Frame) bool {
		mh, ok := f.(*http2.MetaHeadersFrame)
		if ok && mh.StreamID == 3 {
			second = mh
		}
		return ok && mh.StreamID == 3
	})
	if got := second.PseudoValue("status"); got != "200" {
		t.Fatalf("second response %s, want 200", got)
	}
	for _, hf := range second.RegularFields() {
		if hf.Name == "x-only-first" {
			t.Fatalf("second response carries the first one's header: %v", second.Fields)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 2 || reqs[0] != reqs[1] {
		t.Fatalf("the second request did not reuse the first one's state (%d requests)", len(reqs))
	}
	want := []string{"GET|/one?q=1|/one?q=1|a|||c=1; d=2|", "GET|/two|/two|||||"}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d saw %q, want %q", i+1, seen[i], want[i])
		}
	}
	if reqs[1].Form != nil || reqs[1].URL.RawQuery != "" {
		t.Errorf("the second request kept the first one's Form %v or query %q", reqs[1].Form, reqs[1].URL.RawQuery)
	}
}

// TestBodyStreamsAreNotReused: a request body may be read by a goroutine
// the handler left (an upstream transport), so a stream that had one is
// never taken again.
func TestBodyStreamsAreNotReused(t *testing.T) {
	got := make(chan *http.Request, 2)
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r
		io.WriteString(w, "ok")
	}))
	rc := ts.raw(t)
	rc.handshake()
	must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: rc.block(":method", "POST", ":scheme", "http", ":authority", "a", ":path", "/p")}))
	must(t, rc.fr.WriteData(1, true, []byte("body")))
	if s := rc.response(1); s != "200" {
		t.Fatalf("POST: %s", s)
	}
	first := <-got
	waitFor(t, "the POST's worker to finish", func() bool {
		return workers(ts.s) > 0 && idleWorkers(ts.s) == workers(ts.s)
	})
	if n, _ := freeStreams(ts.s); n != 0 {
		t.Fatalf("%d streams kept after a request with a body", n)
	}
	rc.get(3, true)
	if s := rc.response(3); s != "200" {
		t.Fatalf("GET: %s", s)
	}
	if second := <-got; second == first {
		t.Fatal("the GET reused the POST's stream")
	}
}

// TestFreeStreamsLeaveWithTheWorkers: an idle connection holds no stream
// state once its workers left, and still serves.
func TestFreeStreamsLeaveWithTheWorkers(t *testing.T) {
	ts := serve(t, &Server{workerIdle: 20 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	rc := ts.raw(t)
	rc.handshake()
	for id := uint32(1); id <= 9; id += 2 {
		rc.get(id, true)
	}
	answered := map[uint32]string{} // in any order: the five run at once
	rc.until("five responses", func(f http2.Frame) bool {
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			answered[mh.StreamID] = mh.PseudoValue("status")
		}
		return len(answered) == 5
	})
	for id := uint32(1); id <= 9; id += 2 {
		if answered[id] != "200" {
			t.Fatalf("stream %d: %q", id, answered[id])
		}
	}
	waitFor(t, "the workers to leave", func() bool { return workers(ts.s) == 0 })
	if n, held := freeStreams(ts.s); n != 0 || held {
		t.Fatalf("%d streams (list held: %v) kept without workers", n, held)
	}
	rc.get(11, true)
	if s := rc.response(11); s != "200" {
		t.Fatalf("after the workers left: %s", s)
	}
}

type ctxKey struct{}

// TestDetachedContextOutlivesReuse: a context made from a request with
// context.WithoutCancel (as the cache's background refresh does) keeps
// reading the connection's values while the stream serves other requests
// (the race detector watches the reads).
func TestDetachedContextOutlivesReuse(t *testing.T) {
	stop, bad := make(chan struct{}), make(chan any, 1)
	var wg sync.WaitGroup
	started := false
	ts := serve(t, &Server{BaseContext: context.WithValue(context.Background(), ctxKey{}, "base")},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !started {
				started = true
				bg := context.WithoutCancel(r.Context())
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if v := bg.Value(ctxKey{}); v != "base" {
							select {
							case bad <- v:
							default:
							}
							return
						}
					}
				}()
			}
			io.WriteString(w, "ok")
		}))
	rc := ts.raw(t)
	rc.handshake()
	for id := uint32(1); id <= 41; id += 2 {
		rc.get(id, true)
		if s := rc.response(id); s != "200" {
			t.Fatalf("stream %d: %s", id, s)
		}
	}
	close(stop)
	wg.Wait()
	select {
	case v := <-bad:
		t.Fatalf("the detached context read %v, want the connection's value", v)
	default:
	}
}
