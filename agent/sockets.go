package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/l7/handoff"
)

// socketIndexes gives each (listener, network) a stable slot in the
// steering sockmap. The assignment is kept in a file, so a restarted agent
// points VIPs at the same slots the sockmap (pinned, and still holding the
// proxy's sockets) already uses: steering never moves during a restart.
type socketIndexes struct {
	path string // "" : not persisted
	max  uint32 // slots in the sockmap

	mu  sync.Mutex
	idx map[sockKey]uint32
}

func newSocketIndexes(path string, max uint32) *socketIndexes {
	s := &socketIndexes{path: path, max: max, idx: map[sockKey]uint32{}}
	if path == "" {
		return s
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return s
	}
	var m map[string]uint32
	if json.Unmarshal(data, &m) != nil {
		return s
	}
	used := map[uint32]bool{}
	for k, i := range m {
		l, n, ok := strings.Cut(k, "/")
		if !ok || i >= max || used[i] || (n != "tcp" && n != "udp") {
			continue // a smaller map now, or a damaged file: reassign
		}
		used[i] = true
		s.idx[sockKey{l, n}] = i
	}
	return s
}

// lookup is the slot of k, if it has one.
func (s *socketIndexes) lookup(k sockKey) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.idx[k]
	return i, ok
}

// assign returns k's slot, giving it the lowest free one when it has none.
// When every slot is taken, the slot of a key that keep says is no longer
// needed is reused.
func (s *socketIndexes) assign(k sockKey, keep func(sockKey) bool) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.idx[k]; ok {
		return i, nil
	}
	used := make(map[uint32]sockKey, len(s.idx))
	for key, i := range s.idx {
		used[i] = key
	}
	free := uint32(0)
	for ; free < s.max; free++ {
		if _, ok := used[free]; !ok {
			break
		}
	}
	if free == s.max {
		var stale []sockKey
		for key := range s.idx {
			if !keep(key) {
				stale = append(stale, key)
			}
		}
		if len(stale) == 0 {
			return 0, fmt.Errorf("no free steering slot for %s: all %d are in use (-max-sockets)", k, s.max)
		}
		sort.Slice(stale, func(i, j int) bool { return s.idx[stale[i]] < s.idx[stale[j]] })
		free = s.idx[stale[0]]
		delete(s.idx, stale[0])
	}
	s.idx[k] = free
	return free, s.save()
}

// save writes the assignment; callers hold mu.
func (s *socketIndexes) save() error {
	if s.path == "" {
		return nil
	}
	m := make(map[string]uint32, len(s.idx))
	for k, i := range s.idx {
		m[k.String()] = i
	}
	data, _ := json.Marshal(m)
	return envelope.WriteFileAtomic(s.path, data, 0o600)
}

// registered is a socket the agent put in the sockmap.
type registered struct {
	Index uint32
	Addr  string // the proxy's bound address
}

// sockmap is what the socket follower needs of the filter.
type sockmap interface {
	RegisterSocketFD(index uint32, fd int) error
	UnregisterSocket(index uint32) error
}

// socketFollower fetches the proxy's listening sockets over the hand-off
// socket and keeps the sockmap in line with them. fetch runs on one
// goroutine; the other methods may be called from any.
type socketFollower struct {
	path string
	idx  *socketIndexes
	m    sockmap
	keep func(sockKey) bool // keys the active snapshot still steers to

	// owned by fetch's goroutine
	since uint64
	stamp fileStamp
	full  time.Time // last fetch of every socket

	mu      sync.Mutex
	reg     map[sockKey]registered
	gen     uint64
	reached bool
	lastErr string
}

type fileStamp struct {
	ino   uint64
	ctime syscall.Timespec
}

// fullEvery bounds how long a proxy restart that reused both the socket
// file's inode and its change time, and the generation number, could go
// unnoticed.
const fullEvery = 5 * time.Minute

// fetch asks the proxy for its sockets (only the generation when nothing
// changed) and registers what is new. It reports whether the set changed.
func (s *socketFollower) fetch(ctx context.Context) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(s.path, &st); err == nil {
		if fs := (fileStamp{st.Ino, st.Ctim}); fs != s.stamp {
			s.stamp, s.since = fs, 0 // a new proxy process: its generations start over
		}
	}
	if time.Since(s.full) > fullEvery {
		s.since = 0
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	gen, socks, changed, err := handoff.Fetch(ctx, s.path, s.since)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.since, s.reached, s.lastErr = 0, false, err.Error()
		return false, err
	}
	s.reached, s.lastErr, s.gen = true, "", gen
	if !changed {
		return false, nil
	}
	s.full = time.Now()
	next := map[sockKey]registered{}
	var errs []error
	for _, sk := range socks {
		k := sockKey{sk.Listener, sk.Network}
		i, err := s.idx.assign(k, func(o sockKey) bool { return s.keep(o) || inSet(o, socks) })
		if err == nil {
			err = register(s.m, i, sk.File)
		}
		// The proxy keeps its sockets; the agent's copies must go, or a
		// socket the proxy closes would stay open (and steered to) here.
		_ = sk.File.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("register %s (%s): %w", k, sk.Addr, err))
			if old, ok := s.reg[k]; ok {
				next[k] = old // whatever the slot holds stays there
			}
			continue
		}
		next[k] = registered{i, sk.Addr}
	}
	inUse := map[uint32]bool{}
	for _, r := range next {
		inUse[r.Index] = true
	}
	for k, r := range s.reg {
		if _, ok := next[k]; !ok && !inUse[r.Index] {
			if err := s.m.UnregisterSocket(r.Index); err != nil {
				errs = append(errs, fmt.Errorf("unregister %s: %w", k, err))
			}
		}
	}
	s.reg = next
	if len(errs) > 0 {
		s.since = 0 // try all of them again next time
		s.lastErr = errors.Join(errs...).Error()
		return true, errors.Join(errs...)
	}
	s.since = gen
	return true, nil
}

// register puts the received socket at slot i. It never calls File.Fd,
// which would switch the socket, shared with the proxy, to blocking mode;
// and it switches it back to non-blocking when the sender did so (the
// hand-off server calls Fd): a Go proxy whose listener blocks in accept or
// recvmsg cannot close it, and its drain never ends.
func register(m sockmap, i uint32, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	if err := rc.Control(func(fd uintptr) {
		if fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK == 0 {
			_ = unix.SetNonblock(int(fd), true)
		}
		rerr = m.RegisterSocketFD(i, int(fd))
	}); err != nil {
		return err
	}
	return rerr
}

func inSet(k sockKey, socks []handoff.Socket) bool {
	for _, sk := range socks {
		if sk.Listener == k.Listener && sk.Network == k.Network {
			return true
		}
	}
	return false
}

// index is the slot of k while its socket is registered.
func (s *socketFollower) index(k sockKey) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reg[k]
	return r.Index, ok
}

func (s *socketFollower) snapshot() (reg map[sockKey]registered, gen uint64, reached bool, lastErr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reg = make(map[sockKey]registered, len(s.reg))
	for k, r := range s.reg {
		reg[k] = r
	}
	return reg, s.gen, s.reached, s.lastErr
}
