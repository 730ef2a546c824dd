// Package connset is the set of open connections a server keeps for its
// graceful shutdown, shared by l7/h1 and l7/h2: connections join and
// leave it, Shutdown walks it to tell each one to finish, then waits for
// it to empty and, when its deadline ends first, closes what is left.
// What "finish" and "close" mean is the server's (the callbacks).
package connset

import (
	"context"
	"sync"
)

// Set holds connections of type C. The zero Set is empty and ready.
type Set[C comparable] struct {
	mu    sync.Mutex
	conns map[C]struct{}
	wg    sync.WaitGroup
}

// Add puts c in the set; the server calls Remove when c is done.
func (s *Set[C]) Add(c C) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[C]struct{}{}
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
}

// Remove takes c out of the set (once per Add).
func (s *Set[C]) Remove(c C) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// Len is how many connections are in the set.
func (s *Set[C]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Each calls fn for every connection in the set, in no order, holding the
// set's lock: fn must not Add or Remove.
func (s *Set[C]) Each(fn func(C)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		fn(c)
	}
}

// Wait returns nil once every connection has left the set. If ctx ends
// first, it calls closeConn on each connection still in it, waits for
// them to leave, and returns ctx's error.
func (s *Set[C]) Wait(ctx context.Context, closeConn func(C)) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Each(closeConn)
		<-done
		return ctx.Err()
	}
}
