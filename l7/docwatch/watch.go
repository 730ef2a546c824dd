package docwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rampart-edge/rampart/format/envelope"
)

// DefaultInterval is the poll period when Interval is zero.
const DefaultInterval = 250 * time.Millisecond

// racyWindow: a file whose mtime is this close to when it was read may
// change again without its size or mtime changing (coarse file-system
// clocks), so it is read again until a read happens this long after its
// mtime or after its stat was first seen (which also settles an mtime in
// the future).
const racyWindow = 2 * time.Second

// ErrApply wraps an error the Apply hook returned.
var ErrApply = errors.New("apply refused the document")

// Watcher feeds documents of type T from Path (one file) or Dir (every
// regular file there whose name ends in Suffix and does not start with a
// dot). Set exactly one of Path and Dir, and Open. Scan, Run and LoadState
// run on one goroutine; Current, LastRefusal and the counters are safe from
// any goroutine.
type Watcher[T any] struct {
	Name      string // what the documents are, for logs: "snapshot", "deny list"
	Path      string
	Dir       string
	Suffix    string        // in Dir mode, e.g. ".snap"; "" takes every file
	StatePath string        // where the last good file is kept ("" disables it)
	MaxBytes  int           // bound on a file; default envelope.DefaultMaxFileBytes
	Interval  time.Duration // poll period; default DefaultInterval

	// Open verifies and decodes a file against prev, the document in force
	// (the zero T when there is none). On error it may still return the
	// version the file claims (zero when unknown), for the refusal.
	Open func(prev T, data []byte) (T, envelope.Version, error)
	// Apply, when set, puts a document that is about to go in force to use;
	// an error refuses it (reason "apply" unless Reason names another) and
	// the one in force stays.
	Apply func(doc T, v envelope.Version) error
	// Reason, when set, names a refusal's reason for errors the format adds
	// (e.g. "invalid"); "" falls back to the built-in names.
	Reason func(error) string
	// OnReject, when set, hears every refusal (e.g. to count it in a metric).
	OnReject func(Refusal)
	Log      *slog.Logger
	// ReuseBuffers (Path mode only) reads files into two buffers that
	// alternate instead of a new one each time: the one the document in
	// force was read from is kept (Open compares the next file with it),
	// the other is overwritten by the next read. So a document that was
	// replaced, or refused, must not use its bytes any more; Open must not
	// keep them anywhere but in the document it returns. It spares a
	// large file's allocation and zeroing on every change (for an 80 MB
	// deny list ~10–20 ms of a small change, and the garbage it leaves).
	// The second buffer is made when a document goes in force while there
	// is none big enough (the first one after a start), with its pages
	// touched, so the next change does not pay for it (see prepareSpare).
	ReuseBuffers bool

	cur atomic.Pointer[current[T]]

	mu       sync.Mutex
	refusal  *Refusal
	counts   map[string]uint64
	rejected atomic.Uint64

	files   map[string]*fileState // Scan's goroutine only
	bufs    [2][]byte             // with ReuseBuffers: Scan's goroutine only
	scanned bool
	lastErr string // last error listing Dir or stating Path, logged once
}

type current[T any] struct {
	doc  T
	v    envelope.Version
	data []byte
	path string // the file it came from
}

// fileState is what Scan remembers of a file between polls.
type fileState struct {
	info    os.FileInfo // at the last read
	seenAt  time.Time   // when info was first seen
	settled bool        // read racyWindow after its mtime or after seenAt
	last    []byte      // the bytes of the last read, while not settled
	lastErr string      // last read error, so each is refused once
}

// Refusal is a file the watcher refused.
type Refusal struct {
	Version envelope.Version `json:"version"` // zero when the file could not be read
	Reason  string           `json:"reason"`
	Error   string           `json:"error"`
	File    string           `json:"file"`
	At      time.Time        `json:"at"`
}

// Current is the document in force, its version, and whether there is one.
func (w *Watcher[T]) Current() (T, envelope.Version, bool) {
	if c := w.cur.Load(); c != nil {
		return c.doc, c.v, true
	}
	var zero T
	return zero, envelope.Version{}, false
}

// LastRefusal is the last file refused, or nil.
func (w *Watcher[T]) LastRefusal() *Refusal {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refusal == nil {
		return nil
	}
	r := *w.refusal
	return &r
}

// Rejected counts refusals so far.
func (w *Watcher[T]) Rejected() uint64 { return w.rejected.Load() }

// Refusals counts refusals so far by reason.
func (w *Watcher[T]) Refusals() map[string]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]uint64, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

func (w *Watcher[T]) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

func (w *Watcher[T]) name() string {
	if w.Name == "" {
		return "document"
	}
	return w.Name
}

func (w *Watcher[T]) maxBytes() int {
	if w.MaxBytes <= 0 {
		return envelope.DefaultMaxFileBytes
	}
	return w.MaxBytes
}

// check says what is wrong with the watcher's configuration.
func (w *Watcher[T]) check() error {
	switch {
	case w.Open == nil:
		return fmt.Errorf("%s watcher: no Open function", w.name())
	case (w.Path == "") == (w.Dir == ""):
		return fmt.Errorf("%s watcher: set exactly one of Path (%q) and Dir (%q)", w.name(), w.Path, w.Dir)
	}
	return nil
}

// LoadState applies the file at StatePath, if there is one, unless a
// document as high is already in force. A missing file is not an error; a
// bad one is refused, reported and left alone.
func (w *Watcher[T]) LoadState() error {
	if w.Open == nil {
		return fmt.Errorf("%s watcher: no Open function", w.name())
	}
	if w.StatePath == "" {
		return nil
	}
	data, err := w.read(w.StatePath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.refuse(w.StatePath, envelope.Version{}, readReason(err), err)
		return fmt.Errorf("%s state: %w", w.name(), err)
	}
	prev, _, _ := w.Current()
	doc, v, err := w.Open(prev, data)
	if err != nil {
		w.refuse(w.StatePath, v, w.reason(err), err)
		return fmt.Errorf("%s state %s: %w", w.name(), w.StatePath, err)
	}
	if c := w.cur.Load(); c != nil && !c.v.Less(v) {
		return nil
	}
	if err := w.apply(w.StatePath, doc, v, data, false); err != nil {
		return fmt.Errorf("%s state %s: %w", w.name(), w.StatePath, err)
	}
	return nil
}

// Run scans every Interval until ctx ends.
func (w *Watcher[T]) Run(ctx context.Context) error {
	if err := w.check(); err != nil {
		return err
	}
	iv := w.Interval
	if iv <= 0 {
		iv = DefaultInterval
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		w.Scan()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type candidate[T any] struct {
	path string
	data []byte
	doc  T
	v    envelope.Version
}

// Scan looks once at every new or changed file and puts the highest good
// document above the one in force in force.
func (w *Watcher[T]) Scan() {
	if err := w.check(); err != nil {
		w.log().Error("cannot scan", "err", err)
		return
	}
	dirMode := w.Dir != ""
	paths, ok := w.list()
	if !ok {
		return
	}
	keep := make(map[string]*fileState, len(paths))
	var good []candidate[T]
	for _, p := range paths {
		fs := w.files[p]
		if fs == nil {
			fs = &fileState{}
		}
		keep[p] = fs
		if c, ok := w.look(p, fs); ok {
			good = append(good, c)
		}
	}
	w.files = keep
	first := !w.scanned
	w.scanned = true

	sort.SliceStable(good, func(i, j int) bool { return good[j].v.Less(good[i].v) })
	for _, c := range good {
		cur := w.cur.Load()
		if cur != nil && !cur.v.Less(c.v) {
			if first && dirMode {
				// Files already there at start (the history a node keeps, or
				// the one the state came from) are not news.
				w.log().Debug("older file ignored", "kind", w.name(), "file", c.path, "version", c.v.String())
				continue
			}
			why := "stale"
			if c.v.Epoch < cur.v.Epoch {
				why = "older_epoch"
			}
			w.refuse(c.path, c.v, why, fmt.Errorf("version %s is not above the %s in force, %s", c.v, w.name(), cur.v))
			continue
		}
		_ = w.apply(c.path, c.doc, c.v, c.data, true) // refused inside on error
	}
}

// list names the files to look at.
func (w *Watcher[T]) list() ([]string, bool) {
	if w.Path != "" {
		return []string{w.Path}, true
	}
	entries, err := os.ReadDir(w.Dir)
	if err != nil {
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.log().Warn("cannot read the directory; keeping the current document", "kind", w.name(), "dir", w.Dir, "err", err)
		}
		return nil, false
	}
	w.lastErr = ""
	var paths []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !strings.HasSuffix(n, w.Suffix) {
			continue
		}
		paths = append(paths, filepath.Join(w.Dir, n))
	}
	return paths, true
}

// look reads path if it changed and opens it; ok when it opened.
func (w *Watcher[T]) look(path string, fs *fileState) (c candidate[T], ok bool) {
	info, err := os.Stat(path)
	if err != nil {
		if w.Path != "" {
			if msg := err.Error(); msg != w.lastErr {
				w.lastErr = msg
				w.log().Warn("file unavailable; keeping the current document", "kind", w.name(), "path", path, "err", err)
			}
		}
		fs.info = nil
		return c, false
	}
	w.lastErr = ""
	now := time.Now()
	if !sameStamp(fs.info, info) {
		fs.info, fs.seenAt, fs.last = info, now, nil
	} else if fs.settled {
		return c, false
	}
	fs.settled = now.Sub(info.ModTime()) > racyWindow || now.Sub(fs.seenAt) > racyWindow
	if info.Mode().IsRegular() && info.Size() > int64(w.maxBytes()) {
		fs.settled = true // not read; its size changes when it is replaced
		w.refuse(path, envelope.Version{}, "too_large",
			fmt.Errorf("%w: %s is %d bytes, over the %d limit", envelope.ErrTooLarge, path, info.Size(), w.maxBytes()))
		return c, false
	}
	data, err := w.read(path)
	if err != nil {
		fs.info = nil // try again next time, refuse again only for a new error
		if msg := err.Error(); msg != fs.lastErr {
			fs.lastErr = msg
			w.refuse(path, envelope.Version{}, readReason(err), err)
		}
		return c, false
	}
	fs.lastErr = ""
	if fs.last != nil && bytes.Equal(data, fs.last) {
		return c, false // read again only because of the racy window
	}
	fs.last = nil
	if !fs.settled {
		fs.last = data
	}
	cur := w.cur.Load()
	if cur != nil && (w.Path != "" || path == cur.path) && bytes.Equal(data, cur.data) {
		return c, false // in force already (e.g. loaded from the state), rewritten
	}
	var prev T
	if cur != nil {
		prev = cur.doc
	}
	doc, v, err := w.Open(prev, data)
	if err != nil {
		w.refuse(path, v, w.reason(err), err)
		return c, false
	}
	return candidate[T]{path: path, data: data, doc: doc, v: v}, true
}

// read reads path: with ReuseBuffers, into a buffer neither the document in
// force nor a file's racy-window copy holds.
func (w *Watcher[T]) read(path string) ([]byte, error) {
	if !w.ReuseBuffers || w.Dir != "" {
		return readFile(path, w.maxBytes(), nil)
	}
	held := func(b []byte) bool {
		if cap(b) == 0 {
			return false
		}
		at := unsafe.SliceData(b)
		if c := w.cur.Load(); c != nil && cap(c.data) > 0 && unsafe.SliceData(c.data) == at {
			return true
		}
		for _, fs := range w.files {
			if cap(fs.last) > 0 && unsafe.SliceData(fs.last) == at {
				return true
			}
		}
		return false
	}
	for i, b := range w.bufs {
		if held(b) {
			continue
		}
		data, err := readFile(path, w.maxBytes(), b)
		if cap(data) > 0 {
			w.bufs[i] = data[:0] // a grown buffer replaces the old one
		}
		return data, err
	}
	return readFile(path, w.maxBytes(), nil) // the document in force and a racy-window copy hold both
}

// prepareSpare (ReuseBuffers, Path mode) makes sure the buffer the next
// read goes into exists and holds a file of the size of data, the one in
// force, with room: a watcher that has just loaded its first document has
// one buffer, and the first change would otherwise allocate the second
// (for the 80 MB deny list in agent's BenchmarkDenyApply1M/change2 the
// first change after a start took ~115 ms against ~89 ms for later ones at
// load ~6). It runs after the document went in force, off any change's
// path; once both buffers are big enough it does nothing.
func (w *Watcher[T]) prepareSpare(data []byte) {
	if !w.ReuseBuffers || w.Dir != "" {
		return
	}
	at := unsafe.SliceData(data)
	for i, b := range w.bufs {
		if cap(b) > 0 && unsafe.SliceData(b) == at {
			continue // the document in force
		}
		if cap(b) >= len(data)+bytes.MinRead {
			return
		}
		b = make([]byte, 0, spareCap(len(data)))
		prefault(b)
		w.bufs[i] = b
		return
	}
}

// apply runs the Apply hook, puts the document in force and, if persist,
// writes its bytes to StatePath.
func (w *Watcher[T]) apply(path string, doc T, v envelope.Version, data []byte, persist bool) error {
	start := time.Now()
	if w.Apply != nil {
		if err := w.Apply(doc, v); err != nil {
			err = fmt.Errorf("%w: %w", ErrApply, err)
			w.refuse(path, v, w.reason(err), err)
			return err
		}
	}
	w.cur.Store(&current[T]{doc: doc, v: v, data: data, path: path})
	w.log().Info("document in force", "kind", w.name(), "version", v.String(), "file", path,
		"took", time.Since(start).Round(time.Microsecond))
	w.prepareSpare(data)
	if persist && w.StatePath != "" {
		err := os.MkdirAll(filepath.Dir(w.StatePath), 0o755)
		if err == nil {
			err = envelope.WriteFileAtomic(w.StatePath, data, 0o600)
		}
		if err != nil {
			w.log().Error("cannot persist the last good document", "kind", w.name(), "path", w.StatePath, "err", err)
		}
	}
	return nil
}

func (w *Watcher[T]) refuse(path string, v envelope.Version, why string, err error) {
	r := Refusal{Version: v, Reason: why, Error: err.Error(), File: path, At: time.Now().UTC()}
	w.rejected.Add(1)
	w.mu.Lock()
	w.refusal = &r
	if w.counts == nil {
		w.counts = map[string]uint64{}
	}
	w.counts[why]++
	w.mu.Unlock()
	cur := envelope.Version{}
	if c := w.cur.Load(); c != nil {
		cur = c.v
	}
	w.log().Warn("document refused; keeping the current one", "kind", w.name(), "file", path,
		"version", v.String(), "reason", why, "current", cur.String(), "err", err)
	if w.OnReject != nil {
		w.OnReject(r)
	}
}

func (w *Watcher[T]) reason(err error) string {
	if w.Reason != nil {
		if r := w.Reason(err); r != "" {
			return r
		}
	}
	return EnvelopeReason(err)
}

// EnvelopeReason names a refusal by the envelope's error it wraps:
// too_large, format, key_id, signature, digest, apply, else malformed.
func EnvelopeReason(err error) string {
	switch {
	case errors.Is(err, ErrApply):
		return "apply"
	case errors.Is(err, envelope.ErrTooLarge):
		return "too_large"
	case errors.Is(err, envelope.ErrFormat):
		return "format"
	case errors.Is(err, envelope.ErrKeyID):
		return "key_id"
	case errors.Is(err, envelope.ErrSignature):
		return "signature"
	case errors.Is(err, envelope.ErrDigest):
		return "digest"
	}
	return "malformed"
}

func readReason(err error) string {
	if errors.Is(err, envelope.ErrTooLarge) {
		return "too_large"
	}
	return "read"
}

func sameStamp(a, b os.FileInfo) bool {
	return a != nil && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && os.SameFile(a, b)
}
