package nodeclient

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/l7/deny"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

var priv, pub = func() (ed25519.PrivateKey, ed25519.PublicKey) {
	a, b, _ := snapshot.GenerateKey()
	k, _ := snapshot.ParsePrivateKey(a)
	p, _ := snapshot.ParsePublicKey(b)
	return k, p
}()

func snap(t *testing.T, v snapshot.Version) []byte {
	t.Helper()
	c, err := snapshot.ParseYAML([]byte(`listeners: [{name: p, address: "127.0.0.1:0"}]
clusters: [{name: u, endpoints: [{address: "10.0.0.1:80"}]}]
routes: [{id: a, path_template: "/", upstream_cluster: u, timeout_ms: 100, methods: [GET]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	c.Version = v
	f, err := snapshot.Build(c, priv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// control is a scripted control plane: it offers whatever offer returns.
type control struct {
	mu      sync.Mutex
	offer   []byte
	deny    []byte
	purge   []byte
	reports []model.Status
	once    bool // offer the snapshot once, then 204
}

func (c *control) serve(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, err := model.ParseWatchQuery(r.URL.Query())
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case r.URL.Path == "/v1/node/status":
			var st model.Status
			_ = strictJSON(r.Body, &st)
			c.reports = append(c.reports, st)
			w.WriteHeader(http.StatusNoContent)
		case err != nil:
			http.Error(w, err.Error(), 400)
		case r.URL.Path == "/v1/node/snapshot" && c.offer != nil:
			_, _ = w.Write(c.offer)
			if c.once {
				c.offer = nil
			}
		case r.URL.Path == "/v1/node/deny" && c.deny != nil:
			_, _ = w.Write(c.deny)
		case r.URL.Path == "/v1/node/purge" && c.purge != nil:
			_, _ = w.Write(c.purge)
		default:
			time.Sleep(20 * time.Millisecond)
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func strictJSON(r io.Reader, v any) error {
	b, _ := io.ReadAll(r)
	return jsonUnmarshal(b, v)
}

func newClient(t *testing.T, url, dir string) *Client {
	c, err := New(Config{URL: url, Token: "tok", Identity: model.Identity{NodeID: "n1", Zone: "z"}, PublicKey: pub,
		SnapshotDir: filepath.Join(dir, "snaps"), DenyFile: filepath.Join(dir, "deny.json"), KeepSnapshots: 2,
		PurgeFile:      filepath.Join(dir, "purge", "purge.json"),
		Reporter:       func(context.Context) (Observation, error) { return Observation{Ready: true}, nil },
		ReportInterval: 20 * time.Millisecond, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runUntil runs c until done holds (checked every few milliseconds, for
// at most 30 s), then stops it and waits for Run to return, so whatever
// the client was doing (a prune, a file write) has finished.
func runUntil(t *testing.T, c *Client, what string, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() { defer close(ended); _ = c.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			cancel()
			<-ended
			t.Fatalf("%s: not within 30 s; status %+v", what, c.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-ended
}

// reportedRefusal says whether the control plane got a report that
// counts a refusal.
func (c *control) reportedRefusal() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reports) > 0 && c.reports[len(c.reports)-1].Refused > 0
}

// The client takes newer snapshots, writes them for the proxy, prunes
// old files, and refuses (and reports) older ones, an older epoch
// included, and bad signatures; what it has survives a restart.
func TestSnapshotsOnlyGoForward(t *testing.T) {
	dir := t.TempDir()
	cp := &control{}
	srv := cp.serve(t)
	for _, seq := range []uint64{1, 2, 3} {
		cp.mu.Lock()
		cp.offer = snap(t, snapshot.Version{Epoch: 2, Sequence: seq})
		cp.mu.Unlock()
		c := newClient(t, srv.URL, dir)
		want := snapshot.Version{Epoch: 2, Sequence: seq}
		runUntil(t, c, "download "+want.String(), func() bool { return !c.Status().Downloaded.Less(want) })
		if got := c.Status().Downloaded; got != (snapshot.Version{Epoch: 2, Sequence: seq}) {
			t.Fatalf("downloaded %s, want 2.%d", got, seq)
		}
	}
	names := func() string {
		ents, _ := os.ReadDir(filepath.Join(dir, "snaps"))
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "2-2.snap,2-3.snap" {
		t.Fatalf("files %s, want the two newest", got)
	}
	bad := snap(t, snapshot.Version{Epoch: 2, Sequence: 9})
	bad[len(bad)-10] ^= 1
	for what, offer := range map[string][]byte{
		"older sequence": snap(t, snapshot.Version{Epoch: 2, Sequence: 2}),
		"older epoch":    snap(t, snapshot.Version{Epoch: 1, Sequence: 99}),
		"same version":   snap(t, snapshot.Version{Epoch: 2, Sequence: 3}),
		"bad signature":  bad,
	} {
		cp.mu.Lock()
		cp.offer, cp.reports = offer, nil
		cp.mu.Unlock()
		c := newClient(t, srv.URL, dir)
		// Wait for the refusal to be counted and reported (the count only
		// grows, so a later report cannot undo it).
		runUntil(t, c, what, func() bool { return c.Status().Refused > 0 && cp.reportedRefusal() })
		st := c.Status()
		if st.Downloaded != (snapshot.Version{Epoch: 2, Sequence: 3}) || st.Refused == 0 || !strings.Contains(st.LastError, "refused snapshot") {
			t.Fatalf("%s: status %+v", what, st)
		}
		if what == "older epoch" && !strings.Contains(st.LastError, "older epoch") {
			t.Fatalf("older epoch: %s", st.LastError)
		}
		if !cp.reportedRefusal() {
			t.Fatalf("%s: the refusal was not reported", what)
		}
		if got := names(); got != "2-2.snap,2-3.snap" {
			t.Fatalf("%s: files %s", what, got)
		}
	}
}

func TestDenyOnlyGoesForward(t *testing.T) {
	dir := t.TempDir()
	cp := &control{}
	srv := cp.serve(t)
	list := func(seq uint64) []byte {
		f, err := deny.Build([]deny.Entry{{Kind: deny.KindJTI, Value: "x", ExpiresAt: time.Now().Add(time.Hour)}}, seq, priv, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	cp.mu.Lock()
	cp.deny = list(5)
	cp.mu.Unlock()
	c := newClient(t, srv.URL, dir)
	runUntil(t, c, "deny sequence 5", func() bool { return c.Status().DenySequence >= 5 })
	if c.Status().DenySequence != 5 {
		t.Fatalf("deny sequence %d", c.Status().DenySequence)
	}
	cp.mu.Lock()
	cp.deny = list(4)
	cp.mu.Unlock()
	c = newClient(t, srv.URL, dir) // reads sequence 5 from the file
	if got := c.Status().DenySequence; got != 5 {
		t.Fatalf("a restarted client read deny sequence %d from the file, want 5", got)
	}
	runUntil(t, c, "refuse deny sequence 4", func() bool { return c.Status().Refused > 0 })
	st := c.Status()
	data, _ := os.ReadFile(filepath.Join(dir, "deny.json"))
	l, err := deny.Parse(data, pub)
	if err != nil || l.Sequence() != 5 || st.DenySequence != 5 || st.Refused == 0 {
		t.Fatalf("after an older list: file %v %v, status %+v", l, err, st)
	}
}

// Error rate and latency count from the moment the active version
// changed, and restart with the proxy's counters.
func TestStatusWindow(t *testing.T) {
	c := &Client{}
	v1, v2 := snapshot.Version{Epoch: 1, Sequence: 1}, snapshot.Version{Epoch: 1, Sequence: 2}
	c.status(Observation{Active: v1, Ready: true, Requests: 100, Errors: 10, LatencySeconds: 1, LatencyCount: 100}, nil)
	st := c.status(Observation{Active: v1, Ready: true, Requests: 200, Errors: 30, LatencySeconds: 3, LatencyCount: 200}, nil)
	if st.Requests != 100 || st.Errors != 20 || st.ErrorRate != 0.2 || st.LatencyMs != 20 {
		t.Fatalf("same version: %+v", st)
	}
	st = c.status(Observation{Active: v2, Ready: true, Requests: 250, Errors: 30, LatencySeconds: 4, LatencyCount: 250}, nil)
	if st.Active != v2 || st.Requests != 0 || st.ErrorRate != 0 {
		t.Fatalf("new version: %+v", st)
	}
	st = c.status(Observation{Active: v2, Ready: true, Requests: 10, Errors: 1, LatencySeconds: 0.1, LatencyCount: 10}, nil)
	if st.Requests != 10 || st.Errors != 1 {
		t.Fatalf("proxy restarted: %+v", st)
	}
	if st = c.status(Observation{}, io.EOF); st.Ready || !strings.Contains(st.LastError, "observe proxy") {
		t.Fatalf("proxy unreachable: %+v", st)
	}
}
