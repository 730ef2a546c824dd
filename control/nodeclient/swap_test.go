package nodeclient

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// fakeProxy is what the Reporter observes: it swaps in (or refuses) a
// handed-over version only after a few observations, like a proxy that
// polls its snapshot dir.
type fakeProxy struct {
	mu      sync.Mutex
	active  snapshot.Version
	pending snapshot.Version
	delay   int // observations before the pending version is swapped or refused
	refuse  string
	refused snapshot.Version
}

func (f *fakeProxy) observe(context.Context) (Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending != (snapshot.Version{}) {
		if f.delay--; f.delay < 0 {
			if f.refuse != "" {
				f.refused = f.pending
			} else {
				f.active = f.pending
			}
			f.pending = snapshot.Version{}
		}
	}
	return Observation{Active: f.active, Ready: true, Refused: f.refused, RefusedReason: f.refuse}, nil
}

func swapClient(t *testing.T, url, dir string, fp *fakeProxy) *Client {
	t.Helper()
	c, err := New(Config{URL: url, Token: "tok", Identity: model.Identity{NodeID: "n1"}, PublicKey: pub,
		SnapshotDir: filepath.Join(dir, "snaps"), Reporter: fp.observe,
		ReportInterval: time.Hour,                                   // only the first report and those after a hand-over go out
		SwapPoll:       5 * time.Millisecond, SwapWait: time.Minute, // the proxy's swap is counted in observations, not time
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// After a hand-over the client reports what the proxy did with the
// version — active once it swapped it in, not the version it had before —
// without waiting for the report interval (an hour here).
func TestReportAfterSwap(t *testing.T) {
	v := snapshot.Version{Epoch: 3, Sequence: 7}
	cp := &control{offer: snap(t, v), once: true}
	srv := cp.serve(t)
	fp := &fakeProxy{pending: v, delay: 5}
	c := swapClient(t, srv.URL, t.TempDir(), fp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	eventually(t, "a report of "+v.String()+" active", func() bool {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		for _, r := range cp.reports {
			if r.Active == v {
				return true
			}
		}
		return false
	})
	cp.mu.Lock()
	t.Logf("%d reports", len(cp.reports))
	cp.mu.Unlock()
}

// A version the proxy refuses (here: its certificate file is missing) is
// reported at once with the version and the reason, counted once.
func TestProxyRefusalReported(t *testing.T) {
	v := snapshot.Version{Epoch: 3, Sequence: 8}
	cp := &control{offer: snap(t, v), once: true}
	srv := cp.serve(t)
	fp := &fakeProxy{pending: v, delay: 3, refuse: "build: open /etc/rampart/tls/api.pem: no such file or directory"}
	c := swapClient(t, srv.URL, t.TempDir(), fp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	var got model.Status
	eventually(t, "a report of the refusal", func() bool {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		for _, r := range cp.reports {
			if r.RefusedVersion == v {
				got = r
				return true
			}
		}
		return false
	})
	if !strings.Contains(got.RefusedReason, "api.pem: no such file") || got.Refused != 1 || got.Active == v ||
		!strings.Contains(got.LastError, "proxy refused snapshot 3.8") {
		t.Fatalf("report %+v", got)
	}
	// Each further report observes the same refusal again; it must not
	// count again.
	for i := range 3 {
		cp.mu.Lock()
		n := len(cp.reports)
		cp.mu.Unlock()
		c.poke()
		eventually(t, fmt.Sprintf("report %d after the refusal", i+1), func() bool {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			return len(cp.reports) > n
		})
	}
	cp.mu.Lock()
	last := cp.reports[len(cp.reports)-1]
	cp.mu.Unlock()
	if st := c.Status(); st.Refused != 1 || last.Refused != 1 {
		t.Fatalf("the refusal was counted %d times (last report: %d)", st.Refused, last.Refused)
	}
}

// A control plane that stops answering is logged at WARN once (not on
// every retry), shown as unreachable with the error, and its return is
// logged and shown too.
func TestControlReachability(t *testing.T) {
	var down atomic.Bool
	var failed atomic.Int64 // requests answered 503 while down
	cp := &control{}
	inner := cp.serve(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		inner.Config.Handler.ServeHTTP(rec, r)
		if down.Load() { // also for requests in flight when it went down
			failed.Add(1)
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	logs := &lineLog{}
	c, err := New(Config{URL: srv.URL, Token: "tok", Identity: model.Identity{NodeID: "n1"}, PublicKey: pub,
		SnapshotDir: t.TempDir(), Reporter: (&fakeProxy{}).observe, ReportInterval: 10 * time.Millisecond,
		WatchTimeout: 50 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Control(); st.State != ControlUnknown || st.URL != srv.URL {
		t.Fatalf("before any request: %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	eventually(t, "reachable", func() bool { return c.Control().State == ControlOK })
	down.Store(true)
	eventually(t, "unreachable", func() bool { return c.Control().State == ControlUnreachable })
	// Many retries fail meanwhile; the outage is still logged once.
	eventually(t, "retries against the down control plane", func() bool { return failed.Load() >= 6 })
	st := c.Control()
	if st.Reachable || !strings.Contains(st.LastError, "503") || st.Since.IsZero() || st.Failures < 1 {
		t.Fatalf("down: %+v", st)
	}
	if n := logs.count("level=WARN msg=\"control plane unreachable"); n != 1 {
		t.Fatalf("%d WARN lines for one outage:\n%s", n, logs.String())
	}
	down.Store(false)
	eventually(t, "reachable again", func() bool { return c.Control().State == ControlOK })
	if f := c.Control().Failures; f != 0 {
		t.Fatalf("failures after recovery = %d, want 0", f)
	}
	if n := logs.count("control plane reachable"); n < 2 || !c.Control().Reachable {
		t.Fatalf("recovery not logged or shown:\n%s", logs.String())
	}
}

type lineLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lineLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func (l *lineLog) count(s string) int { return strings.Count(l.String(), s) }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30 s waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
