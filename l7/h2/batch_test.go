package h2

import (
	"fmt"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// writeCounter counts the server's writes on one connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(p)
}

// TestResponsesFinishingTogetherShareAWrite: streams whose handlers finish
// in the same round (as handlers woken by one poll of upstream sockets do)
// leave in one write, not one write each (flushSoonLocked's yield).
func TestResponsesFinishingTogetherShareAWrite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: "ready together" is then exact
	const n = 10
	var writes atomic.Int64
	var waiting sync.WaitGroup
	waiting.Add(n)
	release := make(chan struct{})
	ts := serveWrapped(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waiting.Done()
		<-release
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok " + r.URL.Path))
	}), func(c net.Conn) net.Conn { return writeCounter{c, &writes} })
	rc := ts.raw(t)
	rc.handshake()
	for i := range n {
		rc.getPath(uint32(2*i+1), "/", true)
	}
	waitGroupOrFail(t, &waiting, "all handlers waiting")
	before := writes.Load()
	close(release)
	got := map[uint32]bool{}
	for len(got) < n {
		f := rc.read()
		if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
			got[d.StreamID] = true
		}
	}
	if w := writes.Load() - before; w > 2 {
		t.Fatalf("%d responses finishing together took %d writes, want at most 2", n, w)
	}
}

func waitGroupOrFail(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(liveness):
		t.Fatalf("waiting for %s: not within %v", what, liveness)
	}
}

// TestWorkersLeaveDuringBursts: with workers leaving as soon as they are
// idle, bursts of streams that arrive while workers leave are all served
// (a leaving worker takes a stream sent before it left), and the workers
// are gone at the end.
func TestWorkersLeaveDuringBursts(t *testing.T) {
	s := &Server{workerIdle: time.Microsecond}
	ts := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	cl := ts.client()
	for burst := range 50 {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := cl.Get(ts.url("/"))
				if err != nil {
					errs <- err
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("burst %d: %v", burst, err)
		}
	}
	deadline := time.Now().Add(liveness)
	for workers(s) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still there", workers(s))
		}
		time.Sleep(time.Millisecond)
	}
}
