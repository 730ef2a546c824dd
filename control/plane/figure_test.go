package plane_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/control/revision"
	"github.com/rampart-edge/rampart/control/rollout"
	"github.com/rampart-edge/rampart/control/shadow"
	"github.com/rampart-edge/rampart/control/store/boltstore"
	"github.com/rampart-edge/rampart/l7/snapshot"
	"github.com/rampart-edge/rampart/l7/snapshot/snapgen"
)

func newPlane(tb testing.TB) *plane.Plane {
	privPEM, _, _ := snapshot.GenerateKey()
	key, _ := snapshot.ParsePrivateKey(privPEM)
	st, err := boltstore.Open(tb.TempDir(), "test")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	p, err := plane.New(plane.Options{Store: st, Key: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Policy: rollout.Policy{Stages: rollout.DefaultStages(), ActiveTimeout: time.Minute, Bake: time.Minute, NodeTimeout: time.Minute}})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// FIGURE: a 20,600-route revision (snapgen.Config(200, 103)) submitted as
// JSON: parse, validate, route table, compile, sign and store; and the
// shadow check of two such revisions. Logged, not asserted: run with
// go test -run '^$' -bench FigureCompile20k ./control/plane
func BenchmarkFigureCompile20k(b *testing.B) {
	for b.Loop() {
		figureCompile20k(b)
	}
}

func figureCompile20k(t testing.TB) {
	p := newPlane(t)
	cfg := snapgen.Config(200, 103)
	body, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	parsed, err := revision.Parse(body, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	parse := time.Since(t0)
	t0 = time.Now()
	if err := revision.Check(parsed, snapshot.Version{Epoch: 1, Sequence: 1}); err != nil {
		t.Fatal(err)
	}
	check := time.Since(t0)
	start := time.Now()
	rev, _, err := p.Submit(context.Background(), plane.Submission{Body: body, ContentType: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	if rev.Routes != len(cfg.Routes) {
		t.Fatalf("routes %d, want %d", rev.Routes, len(cfg.Routes))
	}
	next := snapgen.Config(200, 103)
	next.Routes = next.Routes[:len(next.Routes)-50]
	old := snapgen.Config(200, 103)
	snapshot.Normalize(old)
	snapshot.Normalize(next)
	sh := time.Now()
	rep, err := shadow.Check(old, next, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE compile at %d routes (%d-byte JSON body, %d-byte snapshot): submit %s in all = parse %s + check (validate, route table) %s + build and sign in the write transaction %.0f ms + store; shadow check %d requests, %d differences: %s",
		rev.Routes, len(body), rev.SnapshotBytes, total.Round(time.Millisecond), parse.Round(time.Millisecond), check.Round(time.Millisecond),
		rev.CompileMs, rep.Requests, rep.Differences, time.Since(sh).Round(time.Millisecond))
}

func BenchmarkSubmit20k(b *testing.B) {
	p := newPlane(b)
	body, _ := json.Marshal(snapgen.Config(200, 103))
	for b.Loop() {
		if _, _, err := p.Submit(context.Background(), plane.Submission{Body: body, ContentType: "application/json"}); err != nil {
			b.Fatal(err)
		}
	}
}
