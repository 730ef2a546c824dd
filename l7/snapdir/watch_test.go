package snapdir_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapdir"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

type env struct {
	t       *testing.T
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	dir     string
	state   string
	backend string
}

func newEnv(t *testing.T) *env {
	privPEM, pubPEM, err := snapshot.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := snapshot.ParsePrivateKey(privPEM)
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	e := &env{t: t, priv: priv, pub: pub, dir: t.TempDir(), state: t.TempDir(),
		backend: strings.TrimPrefix(up.URL, "http://")}
	return e
}

// file returns a signed snapshot with the given version, routing /v<seq>
// (so the active version can be read from which path answers) on port.
func (e *env) file(v snapshot.Version, addr string) []byte {
	e.t.Helper()
	c := &snapshot.Config{
		Version:   v,
		Listeners: []snapshot.Listener{{Name: "http", Address: addr}},
		Clusters:  []snapshot.Cluster{{Name: "c", Endpoints: []snapshot.Endpoint{{Address: e.backend}}}},
		Routes: []snapshot.Route{{ID: "r", Host: "*", Methods: []string{"GET"}, PathTemplate: "/ping",
			UpstreamCluster: "c", TimeoutMs: 1000}},
	}
	f, err := snapshot.Build(c, e.priv, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *env) write(name string, data []byte) {
	e.t.Helper()
	if err := envelope.WriteFileAtomic(filepath.Join(e.dir, name), data, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) start(ctx context.Context) (*proxy.Proxy, *snapdir.Watcher) {
	p := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	w := &snapdir.Watcher{Dir: e.dir, StateDir: e.state, PublicKey: e.pub, Interval: 20 * time.Millisecond,
		Target: p, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := w.LoadLastKnownGood(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()
	e.t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a liveness bound
		defer cancel()
		_ = p.Shutdown(sctx)
	})
	return p, w
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func active(p *proxy.Proxy) string { return p.Status().ActiveVersion }

func TestBadFilesAreRejectedWhileTrafficContinues(t *testing.T) {
	e := newEnv(t)
	addr := "127.0.0.1:" + freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	good := e.file(snapshot.Version{Epoch: 2, Sequence: 1}, addr)
	e.write("a.snap", good)
	p, _ := e.start(ctx)
	waitFor(t, "version 2.1 active", func() bool { return active(p) == "2.1" })

	var failed, total atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get("http://" + addr + "/ping")
				total.Add(1)
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if resp != nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	otherPrivPEM, _, _ := snapshot.GenerateKey()
	otherPriv, _ := snapshot.ParsePrivateKey(otherPrivPEM)
	newer := e.file(snapshot.Version{Epoch: 2, Sequence: 2}, addr)
	foreign := func() []byte {
		saved := e.priv
		e.priv = otherPriv
		defer func() { e.priv = saved }()
		return e.file(snapshot.Version{Epoch: 2, Sequence: 3}, addr)
	}()
	bad := map[string]struct {
		data   []byte
		reason string
	}{
		"tampered.snap":    {bytes.Replace(newer, []byte(`"timeout_ms":1000`), []byte(`"timeout_ms":1001`), 1), "digest"},
		"truncated.snap":   {newer[:len(newer)/3], "malformed"},
		"bad-sig.snap":     {flipSignature(t, newer), "signature"},
		"foreign-key.snap": {foreign, "key_id"},
		"older-epoch.snap": {e.file(snapshot.Version{Epoch: 1, Sequence: 99}, addr), "older_epoch"},
		"same.snap":        {good, "stale"},
	}
	for name, b := range bad {
		e.write(name, b.data)
	}
	for _, reason := range []string{"digest", "malformed", "signature", "key_id", "older_epoch", "stale"} {
		want := 0.0
		for _, b := range bad {
			if b.reason == reason {
				want++
			}
		}
		waitFor(t, "rejections for "+reason, func() bool {
			return rejected(t, p, reason) >= want
		})
	}
	// Traffic goes on after the last rejection: a count, not a time.
	after := total.Load()
	waitFor(t, "requests after every rejection", func() bool { return total.Load() >= after+20 })
	close(stop)
	wg.Wait()
	if active(p) != "2.1" {
		t.Fatalf("active version changed to %s", active(p))
	}
	if failed.Load() != 0 || total.Load() == 0 {
		t.Fatalf("%d of %d requests failed while bad files arrived", failed.Load(), total.Load())
	}
	// A good newer file still goes through.
	e.write("b.snap", newer)
	waitFor(t, "version 2.2 active", func() bool { return active(p) == "2.2" })
	st := p.Status()
	if st.DownloadedVersion != "2.2" || st.DesiredVersion != "2.3" {
		t.Errorf("status %+v: want downloaded 2.2 and desired 2.3 (the foreign-key file claimed 2.3)", st)
	}
}

// flipSignature changes the first character of a file's signature, keeping
// it well-formed base64.
func flipSignature(t *testing.T, file []byte) []byte {
	t.Helper()
	i := bytes.Index(file, []byte(`"signature":"`))
	if i < 0 {
		t.Fatal("no signature in the file")
	}
	out := bytes.Clone(file)
	at := i + len(`"signature":"`)
	if out[at] == 'A' {
		out[at] = 'B'
	} else {
		out[at] = 'A'
	}
	return out
}

// rejected reads rampart_snapshot_rejected_total{reason} from the registry.
func rejected(t *testing.T, p *proxy.Proxy, reason string) float64 {
	t.Helper()
	mfs, err := p.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rampart_snapshot_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestRestartServesLastKnownGood(t *testing.T) {
	e := newEnv(t)
	addr := "127.0.0.1:" + freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	e.write("a.snap", e.file(snapshot.Version{Epoch: 1, Sequence: 7}, addr))
	p, _ := e.start(ctx)
	waitFor(t, "1.7 active", func() bool { return active(p) == "1.7" })
	waitFor(t, "1.7 persisted", func() bool {
		data, err := os.ReadFile(filepath.Join(e.state, snapdir.LastKnownGood))
		if err != nil {
			return false
		}
		s, err := snapshot.Parse(data, e.pub)
		return err == nil && s.Version == snapshot.Version{Epoch: 1, Sequence: 7}
	})
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second) // a liveness bound
	defer scancel()
	if err := p.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	// The source is gone: an empty directory.
	if err := os.Remove(filepath.Join(e.dir, "a.snap")); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	p2, _ := e.start(ctx2)
	if active(p2) != "1.7" {
		t.Fatalf("restart without a source: active %s, want the last-known-good 1.7", active(p2))
	}
	resp, err := http.Get("http://" + addr + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("last-known-good serving: %d", resp.StatusCode)
	}
}

func TestCorruptLastKnownGoodIsReportedNotServed(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.state, snapdir.LastKnownGood), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer p.Shutdown(context.Background())
	w := &snapdir.Watcher{Dir: e.dir, StateDir: e.state, PublicKey: e.pub, Target: p}
	if err := w.LoadLastKnownGood(); err == nil {
		t.Fatal("a corrupt last-known-good loaded without error")
	}
	if p.Active() != nil || rejected(t, p, "malformed") != 1 {
		t.Fatalf("active %v, rejected %v", p.Active(), rejected(t, p, "malformed"))
	}
}

func TestNewestOfSeveralFilesWins(t *testing.T) {
	e := newEnv(t)
	addr := "127.0.0.1:" + freePort(t)
	for i, v := range []snapshot.Version{{Epoch: 1, Sequence: 3}, {Epoch: 2, Sequence: 1}, {Epoch: 1, Sequence: 9}} {
		e.write(string(rune('a'+i))+".snap", e.file(v, addr))
	}
	e.write("notes.txt", []byte("ignored"))
	e.write(".partial.snap", []byte("ignored, hidden"))
	p := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer p.Shutdown(context.Background())
	w := &snapdir.Watcher{Dir: e.dir, StateDir: e.state, PublicKey: e.pub, Target: p,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w.Scan()
	if active(p) != "2.1" {
		t.Fatalf("active %s, want 2.1", active(p))
	}
	// Older files present at start are history, not news: not counted.
	if rejected(t, p, "older_epoch") != 0 || rejected(t, p, "malformed") != 0 {
		t.Fatalf("older_epoch %v malformed %v", rejected(t, p, "older_epoch"), rejected(t, p, "malformed"))
	}
	// An older file that arrives later is refused and counted.
	e.write("late.snap", e.file(snapshot.Version{Epoch: 1, Sequence: 50}, addr))
	w.Scan()
	if rejected(t, p, "older_epoch") != 1 || active(p) != "2.1" {
		t.Fatalf("late older file: older_epoch %v, active %s", rejected(t, p, "older_epoch"), active(p))
	}
	data, err := os.ReadFile(filepath.Join(e.state, snapdir.LastKnownGood))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := snapshot.Parse(data, e.pub); err != nil || s.Version != (snapshot.Version{Epoch: 2, Sequence: 1}) {
		t.Fatalf("persisted %v %v", s, err)
	}
}

// A verified snapshot the proxy cannot build (a certificate file missing
// on this node) is refused: the last refusal names its version, the
// reason "build" and the missing file; the active snapshot stays.
func TestLastRefusalNamesVersionAndReason(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, w := e.start(ctx)
	e.write("1-1.snap", e.file(snapshot.Version{Epoch: 1, Sequence: 1}, "127.0.0.1:0"))
	waitFor(t, "1.1 active", func() bool { return active(p) == "1.1" })
	if r := w.LastRefusal(); r != nil {
		t.Fatalf("a refusal before any: %+v", r)
	}
	c := &snapshot.Config{
		Version: snapshot.Version{Epoch: 1, Sequence: 2},
		Listeners: []snapshot.Listener{{Name: "https", Address: "127.0.0.1:0", Protocols: []string{"http1"},
			TLS: &snapshot.TLS{Certificates: []snapshot.Certificate{{CertFile: "/nonexistent/rampart/cert.pem", KeyFile: "/nonexistent/rampart/key.pem"}}}}},
		Clusters: []snapshot.Cluster{{Name: "c", Endpoints: []snapshot.Endpoint{{Address: e.backend}}}},
		Routes: []snapshot.Route{{ID: "r", Host: "*", Methods: []string{"GET"}, PathTemplate: "/ping",
			UpstreamCluster: "c", TimeoutMs: 1000}},
	}
	f, err := snapshot.Build(c, e.priv, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.write("1-2.snap", f)
	waitFor(t, "the refusal of 1.2", func() bool { return w.LastRefusal() != nil })
	r := w.LastRefusal()
	if r.Version.String() != "1.2" || r.Reason != "build" || !strings.Contains(r.Error, "/nonexistent/rampart/cert.pem") ||
		!strings.HasSuffix(r.File, "1-2.snap") || r.At.IsZero() {
		t.Fatalf("refusal %+v", r)
	}
	if active(p) != "1.1" {
		t.Fatalf("active %s after a refused snapshot, want 1.1", active(p))
	}
}
