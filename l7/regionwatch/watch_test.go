package regionwatch

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
)

var testPriv = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

func doc(t *testing.T, epoch, seq uint64, created time.Time, healthy bool) []byte {
	t.Helper()
	s := &regionstate.State{Version: envelope.Version{Epoch: epoch, Sequence: seq}, Created: created,
		Regions: []regionstate.Region{{Name: "eu-west", Healthy: healthy}, {Name: "us-east", Healthy: true}},
		Platforms: []regionstate.Platform{{Name: "billing", Writer: "eu-west", WriterEpoch: 2,
			Replicas: []regionstate.Replica{{Region: "us-east", LagMs: 40, ObservedAt: created}}}}}
	f, err := regionstate.Build(testPriv, s)
	if err != nil {
		t.Fatalf("build %d.%d: %v", epoch, seq, err)
	}
	return f
}

type rig struct {
	w      *Watcher
	reg    *prometheus.Registry
	path   string
	state  string
	cancel context.CancelFunc
	done   chan struct{}
}

func newRig(t *testing.T, maxAge time.Duration) *rig {
	t.Helper()
	dir := t.TempDir()
	r := &rig{path: filepath.Join(dir, "region-state.json"), state: filepath.Join(dir, "state", "region-state.json"), reg: prometheus.NewRegistry()}
	w, err := New(Config{Path: r.path, StatePath: r.state, PublicKey: testPriv.Public().(ed25519.PublicKey),
		MaxAge: maxAge, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register(r.reg); err != nil {
		t.Fatal(err)
	}
	r.w = w
	return r
}

func (r *rig) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); _ = r.w.Run(ctx) }()
	t.Cleanup(func() { r.cancel(); <-r.done })
}

func (r *rig) write(t *testing.T, data []byte) {
	t.Helper()
	if err := envelope.WriteFileAtomic(r.path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond with a generous liveness deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) version() string {
	s, _ := r.w.Current()
	if s == nil {
		return "none"
	}
	return s.Version.String()
}

func (r *rig) rejected(reason string) float64 {
	return testutil.ToFloat64(r.w.m.rejected.WithLabelValues(reason))
}

func TestApplyOrderAndRefusals(t *testing.T) {
	r := newRig(t, time.Hour)
	if s, fresh := r.w.Current(); s != nil || fresh {
		t.Fatalf("before any document: Current = %v, %v", s, fresh)
	}
	r.start(t)

	// A new file is applied; the time it takes is the figure.
	first := doc(t, 1, 5, time.Now(), true)
	wrote := time.Now()
	r.write(t, first)
	waitFor(t, "1.5 applied", func() bool { return r.version() == "1.5" })
	t.Logf("FIGURE region-state apply ms=%.1f (default poll interval 250 ms)", float64(time.Since(wrote).Microseconds())/1000)
	if _, fresh := r.w.Current(); !fresh {
		t.Fatal("a document created now is not fresh")
	}
	waitFor(t, "1.5 persisted", func() bool {
		persisted, err := os.ReadFile(r.state)
		return err == nil && bytes.Equal(persisted, first)
	})

	// A bad file is kept out and counted.
	r.write(t, []byte("{not a document}\n"))
	waitFor(t, "garbage refused", func() bool { return r.rejected("malformed") == 1 })
	tampered := bytes.Replace(doc(t, 1, 6, time.Now(), true), []byte(`"lag_ms":40`), []byte(`"lag_ms":41`), 1)
	r.write(t, tampered)
	waitFor(t, "tampered refused", func() bool { return r.rejected("digest") == 1 })
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	foreign, err := regionstate.Build(other, &regionstate.State{Version: envelope.Version{Epoch: 9, Sequence: 9}, Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	r.write(t, foreign)
	waitFor(t, "foreign key refused", func() bool { return r.rejected("key_id") == 1 })

	// Lower and equal versions are refused.
	r.write(t, doc(t, 1, 4, time.Now(), true))
	waitFor(t, "lower refused", func() bool { return r.rejected("stale") == 1 })
	r.write(t, doc(t, 0, 99, time.Now(), true))
	waitFor(t, "lower epoch refused", func() bool { return r.rejected("older_epoch") == 1 })
	r.write(t, doc(t, 1, 5, time.Now().Add(time.Second), false))
	waitFor(t, "equal version with other bytes refused", func() bool { return r.rejected("stale") == 2 })
	if v := r.version(); v != "1.5" {
		t.Fatalf("after refusals the version is %s, want 1.5", v)
	}
	if st := r.w.Status(); st.LastRefusal == nil || st.LastRefusal.Reason != "stale" || st.LastRefusal.Version != "1.5" {
		t.Fatalf("status last refusal = %+v", st.LastRefusal)
	}
	s, _ := r.w.Current()
	if reg, _ := s.Region("eu-west"); !reg.Healthy {
		t.Fatal("a refused document changed the state in force")
	}

	// A higher epoch with a lower sequence is newer.
	r.write(t, doc(t, 2, 1, time.Now(), false))
	waitFor(t, "2.1 applied", func() bool { return r.version() == "2.1" })
	s, _ = r.w.Current()
	if reg, _ := s.Region("eu-west"); reg.Healthy {
		t.Fatal("2.1 says eu-west is unhealthy; the state in force says otherwise")
	}
	if got := testutil.ToFloat64(r.w.m.version.WithLabelValues("epoch")); got != 2 {
		t.Fatalf("rampart_region_state_version{part=epoch} = %v", got)
	}
	if got := testutil.ToFloat64(r.w.m.version.WithLabelValues("sequence")); got != 1 {
		t.Fatalf("rampart_region_state_version{part=sequence} = %v", got)
	}
	if n, err := testutil.GatherAndCount(r.reg, "rampart_region_state_rejected_total", "rampart_region_state_version",
		"rampart_region_state_age_seconds", "rampart_region_state_stale"); err != nil || n != len(Reasons)+4 {
		t.Fatalf("metrics gathered: %d, %v", n, err)
	}
}

func TestStaleAndAbsentAreUnknown(t *testing.T) {
	r := newRig(t, MinMaxAge)
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	r.w.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	stale := func() float64 { return testutil.ToFloat64(r.w.m.stale) }
	if stale() != 1 || testutil.ToFloat64(r.w.m.age) != -1 {
		t.Fatalf("absent: stale %v age %v, want 1 and -1", stale(), testutil.ToFloat64(r.w.m.age))
	}
	created := now.Add(-500 * time.Millisecond)
	r.write(t, doc(t, 1, 1, created, true))
	r.w.poll()
	if s, fresh := r.w.Current(); s == nil || !fresh || stale() != 0 {
		t.Fatalf("0.5 s old with a 1 s bound: Current = %v, fresh %v, stale metric %v", s, fresh, stale())
	}
	if age := testutil.ToFloat64(r.w.m.age); age != 0.5 {
		t.Fatalf("rampart_region_state_age_seconds = %v, want 0.5", age)
	}
	set(created.Add(1500 * time.Millisecond))
	s, fresh := r.w.Current()
	if s == nil || fresh || stale() != 1 || r.w.Status().Fresh {
		t.Fatalf("1.5 s old with a 1 s bound: Current = %v, fresh %v, stale metric %v", s, fresh, stale())
	}
	set(created.Add(-1500 * time.Millisecond)) // the producer's clock is ahead by more than the bound
	if _, fresh := r.w.Current(); fresh {
		t.Fatal("a document created 1.5 s in the future counts as fresh")
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	r := newRig(t, time.Hour)
	r.write(t, doc(t, 3, 1, time.Now(), true))
	r.w.poll()
	if r.version() != "3.1" {
		t.Fatalf("not applied: %s (status %+v)", r.version(), r.w.Status())
	}
	// A restart: a new watcher loads the persisted document, and the same
	// file at the watched path is no news.
	w2, err := New(Config{Path: r.path, StatePath: r.state, PublicKey: testPriv.Public().(ed25519.PublicKey), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.LoadState(); err != nil {
		t.Fatal(err)
	}
	if s, _ := w2.Current(); s == nil || s.Version.String() != "3.1" {
		t.Fatalf("after LoadState: %v", s)
	}
	w2.poll()
	if n := testutil.ToFloat64(w2.m.rejected.WithLabelValues("stale")); n != 0 {
		t.Fatalf("the unchanged file was refused as stale %v times", n)
	}
	// A corrupt state file is refused and counted, not used.
	if err := os.WriteFile(r.state, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	w3, _ := New(Config{Path: r.path, StatePath: r.state, PublicKey: testPriv.Public().(ed25519.PublicKey), Logger: slog.New(slog.DiscardHandler)})
	if err := w3.LoadState(); err == nil || !strings.Contains(err.Error(), r.state) {
		t.Fatalf("corrupt state: LoadState = %v", err)
	}
	if s, _ := w3.Current(); s != nil || testutil.ToFloat64(w3.m.rejected.WithLabelValues("malformed")) != 1 {
		t.Fatalf("corrupt state used or not counted: %v", s)
	}
}

func TestConfigBounds(t *testing.T) {
	pub := testPriv.Public().(ed25519.PublicKey)
	for _, c := range []Config{
		{PublicKey: pub},
		{Path: "x"},
		{Path: "x", PublicKey: pub, MaxAge: time.Millisecond},
		{Path: "x", PublicKey: pub, MaxAge: 25 * time.Hour},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	w, err := New(Config{Path: "x", PublicKey: pub, Interval: time.Minute})
	if err != nil || w.MaxAge() != DefaultMaxAge || w.c.Interval != DefaultInterval {
		t.Fatalf("defaults: %v, max age %v, interval %v", err, w.MaxAge(), w.c.Interval)
	}
}
