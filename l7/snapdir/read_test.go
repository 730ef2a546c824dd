package snapdir_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/proxy"
	"github.com/rampart-edge/rampart/l7/snapdir"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// scanOnce builds a proxy and a watcher over e.dir and runs one scan.
func (e *env) scanOnce() (*proxy.Proxy, *snapdir.Watcher) {
	e.t.Helper()
	p := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e.t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	w := &snapdir.Watcher{Dir: e.dir, StateDir: e.state, PublicKey: e.pub, Target: p,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	w.Scan()
	return p, w
}

// A file over snapshot.MaxFileBytes is refused by its size, before it is
// read: a sparse file of MaxFileBytes+1 costs no memory, is counted as
// too_large, and the good file next to it still goes active.
func TestOversizedFileIsRefusedBeforeItIsRead(t *testing.T) {
	e := newEnv(t)
	e.write("a.snap", e.file(snapshot.Version{Epoch: 1, Sequence: 1}, "127.0.0.1:"+freePort(t)))
	f, err := os.Create(filepath.Join(e.dir, "huge.snap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(snapshot.MaxFileBytes + 1); err != nil { // sparse: no blocks written
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, _ := e.scanOnce()
	runtime.ReadMemStats(&after)
	if got := rejected(t, p, "too_large"); got != 1 {
		t.Fatalf("too_large rejections %v, want 1", got)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("the scan allocated %d MiB: the oversized file was read", grew>>20)
	}
	if active(p) != "1.1" {
		t.Fatalf("active %q, want the good file's 1.1", active(p))
	}
}

// A *.snap that is not a regular file (a FIFO no one writes to) neither
// blocks the watcher nor goes unnoticed.
func TestFIFOSnapshotDoesNotBlockTheWatcher(t *testing.T) {
	e := newEnv(t)
	if err := syscall.Mkfifo(filepath.Join(e.dir, "pipe.snap"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan *proxy.Proxy, 1)
	go func() { p, _ := e.scanOnce(); done <- p }()
	select {
	case p := <-done:
		if got := rejected(t, p, "read"); got != 1 {
			t.Fatalf("read rejections %v, want 1", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the scan is stuck opening a FIFO")
	}
}

// A correctly signed file whose key_id names another key is refused and
// counted under key_id.
func TestKeyIDMismatchIsCountedUnderItsOwnReason(t *testing.T) {
	e := newEnv(t)
	file := e.file(snapshot.Version{Epoch: 1, Sequence: 1}, "127.0.0.1:"+freePort(t))
	forged := bytes.Replace(file, []byte(`"key_id":"`+snapshot.KeyID(e.pub)+`"`), []byte(`"key_id":"0123456789abcdef"`), 1)
	if bytes.Equal(forged, file) {
		t.Fatal("the file does not name its key as expected")
	}
	e.write("a.snap", forged)
	p, _ := e.scanOnce()
	if got := rejected(t, p, "key_id"); got != 1 || rejected(t, p, "signature") != 0 {
		t.Fatalf("key_id rejections %v (signature %v), want 1 (0)", got, rejected(t, p, "signature"))
	}
	if p.Active() != nil {
		t.Fatalf("a file naming another key went active: %s", active(p))
	}
}
