// Package tickets makes the TLS session ticket keys of a node's proxies.
//
// Every proxy of a node that names the same state file derives the same
// keys, so a client that resumes its session may land on any of them
// (and on the process a graceful re-exec started). Keys rotate every
// rotation period (the snapshot's tls_session_tickets.rotation_ms): the
// current period's key encrypts new tickets, it and the previous one
// decrypt, so a ticket is accepted for one to two periods.
//
// The keys come from a ratchet kept in the file: the state of period n+1
// is SHA-256 of the state of period n, and a period's key for a listener
// is HKDF-SHA256 of its state, named by the listener and transport. The
// file holds the state of the previous period only: whoever reads it
// first in a new period advances it and writes it back, so a copy of the
// file taken now does not decrypt tickets of periods before the previous
// one. Advancing is deterministic, so two proxies doing it at once write
// the same bytes.
package tickets

import (
	"bytes"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// Rotation bounds and default (the snapshot validates against them).
const (
	DefaultRotation = time.Hour
	MinRotation     = time.Minute
	MaxRotation     = 24 * time.Hour
)

// maxSteps bounds how far the ratchet advances one step at a time; a
// file older than that (years at a one-minute rotation) is re-based
// with one hash instead.
const maxSteps = 1 << 22

// MaxFileBytes bounds the state file.
const MaxFileBytes = 4096

// ErrState marks a state file that is unsafe or does not parse.
var ErrState = errors.New("bad TLS ticket state")

// state is the file's content: the ratchet at Epoch, periods of RotationMs.
type state struct {
	Version    int    `json:"version"`
	RotationMs int64  `json:"rotation_ms"`
	Epoch      int64  `json:"epoch"`
	State      string `json:"state"` // 32 bytes, hex
	raw        [32]byte
}

// Parse decodes a state file.
func Parse(b []byte) (state, error) {
	var s state
	if len(b) > MaxFileBytes {
		return s, fmt.Errorf("%w: %d bytes, more than %d", ErrState, len(b), MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("%w: %v", ErrState, err)
	}
	if dec.More() {
		return s, fmt.Errorf("%w: bytes after the object", ErrState)
	}
	switch {
	case s.Version != 1:
		return s, fmt.Errorf("%w: version %d, want 1", ErrState, s.Version)
	case s.RotationMs < MinRotation.Milliseconds() || s.RotationMs > MaxRotation.Milliseconds():
		return s, fmt.Errorf("%w: rotation_ms %d outside %d..%d", ErrState, s.RotationMs, MinRotation.Milliseconds(), MaxRotation.Milliseconds())
	case s.Epoch < 0:
		return s, fmt.Errorf("%w: epoch %d", ErrState, s.Epoch)
	}
	raw, err := hex.DecodeString(s.State)
	if err != nil || len(raw) != 32 {
		return s, fmt.Errorf("%w: state is not 64 hex digits", ErrState)
	}
	copy(s.raw[:], raw)
	return s, nil
}

func (s *state) encode() []byte {
	s.Version, s.State = 1, hex.EncodeToString(s.raw[:])
	b, _ := json.Marshal(s)
	return append(b, '\n')
}

// Source derives the keys. The zero value is not usable; use New.
type Source struct {
	path     string // "": the state lives in this process only
	rotation atomic.Int64
	version  atomic.Uint64
	mu       sync.Mutex
	mem      state // path == ""
	memSet   bool
}

// New opens the state file at path, making it (mode 0600, the default
// rotation) when it does not exist, and takes the file's rotation until
// SetRotation; a file readable by group or others, or one that does not
// parse, is an error. path "" keeps a random state in this process:
// tickets then resume only here.
func New(path string) (*Source, error) {
	s := &Source{path: path}
	s.rotation.Store(int64(DefaultRotation))
	if path == "" {
		return s, nil
	}
	rot := int64(DefaultRotation)
	st, _, err := s.read(rot, time.Now().UnixNano()/rot-1)
	if err != nil {
		return nil, err
	}
	// Start from the file's period, so that opening it changes nothing
	// the node's other proxies use; the snapshot's setting follows.
	s.rotation.Store(st.RotationMs * int64(time.Millisecond))
	return s, nil
}

// Shared reports whether the keys come from a file (and so are shared).
func (s *Source) Shared() bool { return s.path != "" }

// SetRotation sets the rotation period (bounded); a change bumps Version
// so listeners fetch keys again.
func (s *Source) SetRotation(d time.Duration) {
	d = min(max(d, MinRotation), MaxRotation)
	if s.rotation.Swap(int64(d)) != int64(d) {
		s.version.Add(1)
	}
}

// Rotation is the rotation period in force.
func (s *Source) Rotation() time.Duration { return time.Duration(s.rotation.Load()) }

// Version changes whenever keys fetched earlier may be out of date for a
// reason other than time (the rotation period changed).
func (s *Source) Version() uint64 { return s.version.Load() }

// Keys are scope's ticket keys at now, the encrypting one first, and when
// they change next.
func (s *Source) Keys(scope string, now time.Time) ([][32]byte, time.Time, error) {
	rot := time.Duration(s.rotation.Load())
	e := now.UnixNano() / int64(rot)
	s.mu.Lock()
	st, err := s.load(now)
	s.mu.Unlock()
	if err != nil {
		return nil, time.Time{}, err
	}
	next := time.Unix(0, (e+1)*int64(rot))
	if st.Epoch >= e { // the file is ahead of our clock (it stepped back): its period only
		return [][32]byte{key(st.raw, scope)}, next, nil
	}
	prev := st.raw // st.Epoch == e-1
	return [][32]byte{key(step(prev), scope), key(prev, scope)}, next, nil
}

// load reads the state and brings it to the period before now's (writing
// it back when it changed), making it first when there is none.
func (s *Source) load(now time.Time) (state, error) {
	rot := s.rotation.Load()
	want := now.UnixNano()/rot - 1
	var st state
	switch {
	case s.path == "" && s.memSet:
		st = s.mem
	case s.path == "":
		st = fresh(rot, want)
	default:
		var made bool
		var err error
		st, made, err = s.read(rot, want)
		if err != nil || made {
			return st, err
		}
	}
	if advance(&st, rot, want) || (s.path == "" && !s.memSet) {
		if s.path == "" {
			s.mem, s.memSet = st, true
		} else if err := envelope.WriteFileAtomic(s.path, st.encode(), 0o600); err != nil {
			return st, fmt.Errorf("TLS ticket state: %w", err)
		}
	}
	return st, nil
}

func fresh(rot, epoch int64) state {
	st := state{Version: 1, RotationMs: rot / int64(time.Millisecond), Epoch: epoch}
	_, _ = rand.Read(st.raw[:])
	return st
}

// read reads the file, or makes it when it is missing (link(2), so of
// two proxies starting at once one state wins and both use it).
func (s *Source) read(rot, want int64) (state, bool, error) {
	for range 3 {
		f, err := os.Open(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			st := fresh(rot, want)
			if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
				return st, false, fmt.Errorf("TLS ticket state %s: %w", s.path, err)
			}
			err := envelope.WriteFileNew(s.path, st.encode(), 0o600)
			if err == nil {
				return st, true, nil
			}
			if errors.Is(err, fs.ErrExist) {
				continue // another proxy made it first: read theirs
			}
			return st, false, fmt.Errorf("TLS ticket state %s: %w", s.path, err)
		}
		if err != nil {
			return state{}, false, fmt.Errorf("TLS ticket state: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return state{}, false, fmt.Errorf("TLS ticket state: %w", err)
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return state{}, false, fmt.Errorf("%w: %s is not a regular file", ErrState, s.path)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			f.Close()
			return state{}, false, fmt.Errorf("%w: %s has mode %04o: group or others could read the ticket keys (chmod 600)", ErrState, s.path, fi.Mode().Perm())
		}
		b := make([]byte, MaxFileBytes+1)
		n, rerr := io.ReadFull(f, b)
		f.Close()
		if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) && !errors.Is(rerr, io.EOF) {
			return state{}, false, fmt.Errorf("TLS ticket state: %w", rerr)
		}
		st, err := Parse(b[:n])
		if err != nil {
			return st, false, fmt.Errorf("%s: %w", s.path, err)
		}
		return st, false, nil
	}
	return state{}, false, fmt.Errorf("TLS ticket state %s: made and removed under us", s.path)
}

// advance brings st to epoch want at rotation rot; it reports a change.
func advance(st *state, rot, want int64) bool {
	changed := false
	if st.RotationMs != rot/int64(time.Millisecond) { // a new period length starts a new chain
		st.raw = mix(st.raw, "rotation", rot, want)
		st.RotationMs, st.Epoch, changed = rot/int64(time.Millisecond), want, true
	}
	if st.Epoch < want {
		if want-st.Epoch > maxSteps {
			st.raw = mix(st.raw, "skip", rot, want)
		} else {
			for i := st.Epoch; i < want; i++ {
				st.raw = step(st.raw)
			}
		}
		st.Epoch, changed = want, true
	}
	return changed
}

// step is the ratchet: one-way, so a state does not give earlier ones.
func step(s [32]byte) [32]byte {
	return sha256.Sum256(append([]byte("rampart tls ticket ratchet\x00"), s[:]...))
}

func mix(s [32]byte, why string, rot, epoch int64) [32]byte {
	b := append([]byte("rampart tls ticket rebase\x00"+why+"\x00"), s[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(rot))
	b = binary.BigEndian.AppendUint64(b, uint64(epoch))
	return sha256.Sum256(b)
}

// key is a period's key for one listener and transport.
func key(s [32]byte, scope string) [32]byte {
	k, err := hkdf.Key(sha256.New, s[:], nil, "rampart tls session ticket key v1\x00"+scope, 32)
	if err != nil {
		panic(err) // 32 bytes of SHA-256 HKDF cannot fail
	}
	return [32]byte(k)
}
