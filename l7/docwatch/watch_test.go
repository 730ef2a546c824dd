package docwatch

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/rampart-edge/rampart/format/envelope"
)

// The documents in these tests are real envelopes of a small format whose
// body is {"n":N,"pad":"…"}, cut into blocks so that prev matters.
const testFormat = "rampart.docwatch-test.v1"

type doc struct {
	N      int `json:"n"`
	opened *envelope.Opened
}

func key(seed byte) (ed25519.PrivateKey, ed25519.PublicKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return priv, priv.Public().(ed25519.PublicKey)
}

func build(t *testing.T, priv ed25519.PrivateKey, v envelope.Version, n int) []byte {
	t.Helper()
	body := fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, n, strings.Repeat("x", 4000))
	f, err := envelope.Seal(priv, testFormat, v, time.Unix(1, 0), body, []int{1000, 2000, 3000})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func openDoc(pub ed25519.PublicKey) func(prev *doc, data []byte) (*doc, envelope.Version, error) {
	return func(prev *doc, data []byte) (*doc, envelope.Version, error) {
		var po *envelope.Opened
		if prev != nil {
			po = prev.opened
		}
		o, err := envelope.Open(data, pub, testFormat, po)
		if err != nil {
			return nil, envelope.Version{}, err
		}
		d := &doc{opened: o}
		if err := json.Unmarshal(o.Body(), d); err != nil {
			return nil, o.Version, fmt.Errorf("%w: body: %w", errInvalid, err)
		}
		if d.N < 0 {
			return nil, o.Version, fmt.Errorf("%w: n is %d", errInvalid, d.N)
		}
		return d, o.Version, nil
	}
}

var errInvalid = errors.New("invalid test document")

type env struct {
	t       *testing.T
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	dir     string
	state   string
	mu      sync.Mutex
	applied []envelope.Version
	rejects []string
}

func newEnv(t *testing.T) *env {
	priv, pub := key(1)
	return &env{t: t, priv: priv, pub: pub, dir: t.TempDir(), state: filepath.Join(t.TempDir(), "state", "last-good")}
}

func (e *env) watcher() *Watcher[*doc] {
	return &Watcher[*doc]{
		Name:      "test document",
		StatePath: e.state,
		Open:      openDoc(e.pub),
		Apply: func(d *doc, v envelope.Version) error {
			if d.N == 666 {
				return errors.New("the user refuses 666")
			}
			e.mu.Lock()
			e.applied = append(e.applied, v)
			e.mu.Unlock()
			return nil
		},
		Reason: func(err error) string {
			if errors.Is(err, errInvalid) {
				return "invalid"
			}
			return ""
		},
		OnReject: func(r Refusal) {
			e.mu.Lock()
			e.rejects = append(e.rejects, r.Reason)
			e.mu.Unlock()
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (e *env) write(name string, data []byte) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := envelope.WriteFileAtomic(p, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) rejected() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.rejects...)
}

func v(e, s uint64) envelope.Version { return envelope.Version{Epoch: e, Sequence: s} }

func inForce(t *testing.T, w *Watcher[*doc], want envelope.Version, n int) {
	t.Helper()
	d, got, ok := w.Current()
	if !ok || got != want || d.N != n {
		t.Fatalf("in force: %v %v (doc %+v), want %v with n=%d", ok, got, d, want, n)
	}
}

func TestFileModeOrderAndRefusals(t *testing.T) {
	e := newEnv(t)
	w := e.watcher()
	path := filepath.Join(e.dir, "doc")
	w.Path = path
	if err := w.LoadState(); err != nil {
		t.Fatalf("LoadState without a state file: %v", err)
	}
	w.Scan() // no file yet: nothing, no refusal
	if _, _, ok := w.Current(); ok || w.Rejected() != 0 {
		t.Fatalf("before any file: current %v, %d refused", ok, w.Rejected())
	}

	e.write("doc", build(t, e.priv, v(1, 1), 1))
	w.Scan()
	inForce(t, w, v(1, 1), 1)
	e.write("doc", build(t, e.priv, v(1, 2), 2))
	w.Scan()
	inForce(t, w, v(1, 2), 2)
	if o := w.cur.Load().doc.opened; o.Stat.Reused == 0 {
		t.Errorf("the second open reused no block of the first: %+v", o.Stat)
	}
	state, err := os.ReadFile(e.state)
	if err != nil || !bytes.Equal(state, build(t, e.priv, v(1, 2), 2)) {
		t.Fatalf("state file: %v, not the applied bytes", err)
	}

	other, _ := key(2)
	tampered := build(t, e.priv, v(1, 9), 9)
	tampered[len(tampered)-10] = 'y'
	steps := []struct {
		name string
		data []byte
		want string
	}{
		{"equal version, other bytes", build(t, e.priv, v(1, 2), 3), "stale"},
		{"lower sequence", build(t, e.priv, v(1, 1), 1), "stale"},
		{"lower epoch", build(t, e.priv, v(0, 7), 7), "older_epoch"},
		{"other key", build(t, other, v(1, 3), 3), "key_id"},
		{"body changed", tampered, "digest"},
		{"not an envelope", []byte("{}\n"), "malformed"},
		{"invalid body", build(t, e.priv, v(1, 4), -1), "invalid"},
		{"apply refuses", build(t, e.priv, v(1, 5), 666), "apply"},
	}
	for i, s := range steps {
		e.write("doc", s.data)
		w.Scan()
		got := e.rejected()
		if len(got) != i+1 || got[i] != s.want {
			t.Fatalf("%s: refusals %v, want %q last", s.name, got, s.want)
		}
		inForce(t, w, v(1, 2), 2)
		if r := w.LastRefusal(); r == nil || r.Reason != s.want || r.File != path {
			t.Fatalf("%s: last refusal %+v", s.name, r)
		}
	}
	if r := w.LastRefusal(); r.Version != v(1, 5) || !strings.Contains(r.Error, "666") {
		t.Errorf("apply refusal %+v: want version 1.5 and the hook's error", r)
	}
	if c := w.Refusals(); c["stale"] != 2 || c["older_epoch"] != 1 || c["apply"] != 1 || w.Rejected() != uint64(len(steps)) {
		t.Errorf("counts %v, total %d", c, w.Rejected())
	}
	// The bytes in force written again (a new inode and mtime) are not news.
	e.write("doc", build(t, e.priv, v(1, 2), 2))
	w.Scan()
	if n := len(e.rejected()); n != len(steps) {
		t.Errorf("the document in force, rewritten, was refused: %v", e.rejected())
	}
	// Over the size bound: refused by its size.
	w.MaxBytes = 100
	e.write("doc", build(t, e.priv, v(1, 6), 6))
	w.Scan()
	if got := e.rejected(); got[len(got)-1] != "too_large" {
		t.Errorf("over MaxBytes: refusals %v", got)
	}
	inForce(t, w, v(1, 2), 2)

	// A restart with no source serves the state; one with a bad state
	// serves nothing and says so.
	w2 := e.watcher()
	w2.Path = filepath.Join(e.dir, "absent")
	if err := w2.LoadState(); err != nil {
		t.Fatal(err)
	}
	inForce(t, w2, v(1, 2), 2)
	w2.Scan() // the source is absent: the state stays
	inForce(t, w2, v(1, 2), 2)
	if err := os.WriteFile(e.state, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w3 := e.watcher()
	w3.Path = w2.Path
	if err := w3.LoadState(); !errors.Is(err, envelope.ErrMalformed) {
		t.Fatalf("bad state: %v, want ErrMalformed", err)
	}
	if _, _, ok := w3.Current(); ok || w3.Refusals()["malformed"] != 1 {
		t.Fatalf("bad state: in force %v, refusals %v", ok, w3.Refusals())
	}
}

func TestDirModeHistoryNewestAndFallback(t *testing.T) {
	e := newEnv(t)
	e.write("a.doc", build(t, e.priv, v(1, 1), 1))
	e.write("b.doc", build(t, e.priv, v(1, 3), 3))
	e.write("c.doc", build(t, e.priv, v(1, 2), 2))
	e.write("ignored.txt", build(t, e.priv, v(9, 9), 99))
	e.write(".hidden.doc", build(t, e.priv, v(9, 9), 99))
	w := e.watcher()
	w.Dir, w.Suffix = e.dir, ".doc"
	w.Scan()
	inForce(t, w, v(1, 3), 3)
	if got := e.rejected(); len(got) != 0 {
		t.Fatalf("files present at start were refused: %v", got)
	}
	e.write("d.doc", build(t, e.priv, v(1, 2), 22))
	w.Scan()
	if got := e.rejected(); len(got) != 1 || got[0] != "stale" {
		t.Fatalf("a new lower file: refusals %v, want [stale]", got)
	}
	// Two new files in one scan: the higher one's Apply fails, the lower
	// (still above the one in force) goes in force instead.
	e.write("e.doc", build(t, e.priv, v(2, 1), 666))
	e.write("f.doc", build(t, e.priv, v(1, 9), 9))
	w.Scan()
	inForce(t, w, v(1, 9), 9)
	if got := e.rejected(); len(got) != 2 || got[1] != "apply" {
		t.Fatalf("refusals %v, want stale then apply", got)
	}
	// A FIFO with the suffix neither blocks the scan nor goes in force.
	if err := syscall.Mkfifo(filepath.Join(e.dir, "g.doc"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.write("h.doc", build(t, e.priv, v(3, 0), 30))
	w.Scan()
	inForce(t, w, v(3, 0), 30)
	if got := e.rejected(); len(got) != 3 || got[2] != "read" {
		t.Fatalf("refusals %v, want read for the FIFO", got)
	}
	w.Scan() // the FIFO's error is refused once, not at each poll
	if got := e.rejected(); len(got) != 3 {
		t.Fatalf("the FIFO was refused again: %v", got)
	}
	e.mu.Lock()
	applied := append([]envelope.Version(nil), e.applied...)
	e.mu.Unlock()
	if fmt.Sprint(applied) != "[1.3 1.9 3.0]" {
		t.Errorf("applied %v, want 1.3, 1.9, 3.0 in that order", applied)
	}
}

// A sparse file over the bound costs no read: it is refused by its size.
func TestOversizedFileIsNotRead(t *testing.T) {
	e := newEnv(t)
	w := e.watcher()
	w.Dir = e.dir
	f, err := os.Create(filepath.Join(e.dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(envelope.DefaultMaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	w.Scan()
	w.Scan()
	if c := w.Refusals(); c["too_large"] != 1 || len(c) != 1 {
		t.Fatalf("refusals %v, want one too_large", c)
	}
	if _, err := readFile(filepath.Join(e.dir, "huge"), envelope.DefaultMaxFileBytes, nil); !errors.Is(err, envelope.ErrTooLarge) {
		t.Fatalf("readFile: %v, want ErrTooLarge", err)
	}
}

// A file rewritten in place with the same size and mtime is seen while its
// mtime is recent (the racy window).
func TestSameStampRewriteIsSeen(t *testing.T) {
	e := newEnv(t)
	w := e.watcher()
	path := e.write("doc", build(t, e.priv, v(1, 1), 1))
	w.Path = path
	// An mtime in the future keeps the file unsettled until two seconds
	// after it was first seen, whatever the clock does between the scans.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	w.Scan()
	inForce(t, w, v(1, 1), 1)
	st1, _ := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(build(t, e.priv, v(1, 2), 2)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(path)
	if !sameStamp(st1, st2) {
		t.Fatal("the rewrite changed the stamp; the test needs it unchanged")
	}
	w.Scan()
	inForce(t, w, v(1, 2), 2)
}

func TestRunAppliesAndStops(t *testing.T) {
	e := newEnv(t)
	w := e.watcher()
	w.Dir, w.Interval = e.dir, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e.write("1.doc", build(t, e.priv, v(1, 1), 1))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, got, ok := w.Current(); ok && got == v(1, 1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file was not applied within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	bad := &Watcher[*doc]{Path: "x", Dir: "y", Open: openDoc(e.pub)}
	if err := bad.Run(context.Background()); err == nil {
		t.Error("Run with both Path and Dir started")
	}
	if err := (&Watcher[*doc]{Path: "x"}).Run(context.Background()); err == nil {
		t.Error("Run without Open started")
	}
}

// In a directory, a copy of the document in force under another name is an
// equal version (stale); the same file rewritten is not news.
func TestDirModeCopyOfCurrentIsStale(t *testing.T) {
	e := newEnv(t)
	w := e.watcher()
	w.Dir = e.dir
	w.Scan()
	one := build(t, e.priv, v(1, 1), 1)
	e.write("a", one)
	w.Scan()
	inForce(t, w, v(1, 1), 1)
	e.write("a", one)
	w.Scan()
	if got := e.rejected(); len(got) != 0 {
		t.Fatalf("the file in force, rewritten: refusals %v", got)
	}
	e.write("b", one)
	w.Scan()
	if got := e.rejected(); len(got) != 1 || got[0] != "stale" {
		t.Fatalf("a copy under another name: refusals %v, want [stale]", got)
	}
}

// TestReuseBuffers: with ReuseBuffers, reads alternate between two buffers
// and never write into the one the document in force came from: a refused
// file, then a good one, leave the document in force (and the block
// comparison the next open makes with it) intact, and the third good file
// lands in the first one's buffer.
func TestReuseBuffers(t *testing.T) {
	e := newEnv(t)
	w := e.watcher()
	w.Path, w.ReuseBuffers = filepath.Join(e.dir, "doc"), true
	old := time.Now().Add(-time.Hour) // settled: no racy-window copy holds a buffer
	put := func(data []byte) {
		p := e.write("doc", data)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	f1 := build(t, e.priv, v(1, 1), 1)
	put(f1)
	w.Scan()
	inForce(t, w, v(1, 1), 1)
	first := w.cur.Load().data
	// the first document in force leaves a spare buffer ready for the next
	// read, so the first change does not allocate one
	var spare []byte
	for _, b := range w.bufs {
		if unsafe.SliceData(b) != unsafe.SliceData(first) {
			spare = b
		}
	}
	if cap(spare) < len(f1)+bytes.MinRead {
		t.Fatalf("after the first document: spare buffer of cap %d, want >= %d", cap(spare), len(f1)+bytes.MinRead)
	}

	bad := build(t, e.priv, v(1, 2), 2)
	bad[len(bad)/2] ^= 1 // in the body: a block that does not hash right
	put(bad)
	w.Scan()
	inForce(t, w, v(1, 1), 1)
	if got := e.rejected(); len(got) != 1 {
		t.Fatalf("refusals %v, want one", got)
	}
	if !bytes.Equal(w.cur.Load().data, f1) || !bytes.Equal(w.cur.Load().doc.opened.Body(), f1[len(f1)-len(w.cur.Load().doc.opened.Body())-2:len(f1)-2]) {
		t.Fatal("a refused read wrote into the buffer of the document in force")
	}

	f2 := build(t, e.priv, v(1, 3), 3)
	put(f2)
	w.Scan()
	inForce(t, w, v(1, 3), 3)
	second := w.cur.Load().data
	if unsafe.SliceData(second) == unsafe.SliceData(first) {
		t.Fatal("the second document was read into the first one's buffer while it was in force")
	}
	if unsafe.SliceData(second) != unsafe.SliceData(spare) {
		t.Error("the second document was not read into the spare buffer made when the first went in force")
	}
	if o := w.cur.Load().doc.opened; o.Stat.Reused == 0 {
		t.Errorf("the open after a refused read reused no block of the list in force: %+v", o.Stat)
	}

	f3 := build(t, e.priv, v(1, 4), 4)
	put(f3)
	w.Scan()
	inForce(t, w, v(1, 4), 4)
	if unsafe.SliceData(w.cur.Load().data) != unsafe.SliceData(first) {
		t.Error("the third document was not read into the first one's buffer (no reuse)")
	}
	if !bytes.Equal(w.cur.Load().data, f3) {
		t.Fatal("the document in force is not the file's bytes")
	}
	st, err := os.ReadFile(e.state)
	if err != nil || !bytes.Equal(st, f3) {
		t.Fatalf("state file: %v, equal %v", err, bytes.Equal(st, f3))
	}
}
