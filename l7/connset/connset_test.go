package connset

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeConn leaves the set when it is closed (as a server's connection
// does when its socket is).
type fakeConn struct {
	id     int
	closed chan struct{}
	once   sync.Once
}

func newFake(id int) *fakeConn { return &fakeConn{id: id, closed: make(chan struct{})} }

func (c *fakeConn) close() { c.once.Do(func() { close(c.closed) }) }

// serve is a server's ServeConn: in the set until closed.
func serve(s *Set[*fakeConn], c *fakeConn, started *sync.WaitGroup) {
	s.Add(c)
	started.Done()
	<-c.closed
	s.Remove(c)
}

func TestAddRemoveEachLen(t *testing.T) {
	var s Set[*fakeConn]
	if s.Len() != 0 {
		t.Fatalf("the zero set holds %d", s.Len())
	}
	if err := s.Wait(context.Background(), func(*fakeConn) { t.Error("closed a connection of an empty set") }); err != nil {
		t.Fatalf("Wait on an empty set: %v", err)
	}
	a, b := newFake(1), newFake(2)
	s.Add(a)
	s.Add(b)
	var ids []int
	s.Each(func(c *fakeConn) { ids = append(ids, c.id) })
	slices.Sort(ids)
	if s.Len() != 2 || !slices.Equal(ids, []int{1, 2}) {
		t.Fatalf("len %d, each saw %v; want 2, [1 2]", s.Len(), ids)
	}
	s.Remove(a)
	ids = ids[:0]
	s.Each(func(c *fakeConn) { ids = append(ids, c.id) })
	if s.Len() != 1 || !slices.Equal(ids, []int{2}) {
		t.Fatalf("after Remove: len %d, each saw %v; want 1, [2]", s.Len(), ids)
	}
	s.Remove(b)
}

// Connections that finish when told: Wait returns nil and closes none.
func TestWaitForConnectionsToFinish(t *testing.T) {
	var s Set[*fakeConn]
	var started sync.WaitGroup
	conns := []*fakeConn{newFake(1), newFake(2), newFake(3)}
	started.Add(len(conns))
	for _, c := range conns {
		go serve(&s, c, &started)
	}
	started.Wait()
	s.Each(func(c *fakeConn) { go c.close() })                               // "finish your response, then close"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a liveness bound
	defer cancel()
	if err := s.Wait(ctx, func(c *fakeConn) { t.Errorf("Wait closed connection %d though every one finished", c.id) }); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if s.Len() != 0 {
		t.Fatalf("%d connections left", s.Len())
	}
}

// A connection that does not finish: at ctx's end Wait closes it, waits
// for it to leave, and returns ctx's error.
func TestWaitClosesWhatIsLeftAtTheDeadline(t *testing.T) {
	var s Set[*fakeConn]
	var started sync.WaitGroup
	done, stuck := newFake(1), newFake(2)
	started.Add(2)
	go serve(&s, done, &started)
	go serve(&s, stuck, &started)
	started.Wait()
	done.close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s.Len() != 1 { // the finished one left; only the stuck one holds the set
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	var closed []int
	err := s.Wait(ctx, func(c *fakeConn) { closed = append(closed, c.id); c.close() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want context.Canceled", err)
	}
	if !slices.Equal(closed, []int{2}) || s.Len() != 0 {
		t.Fatalf("closed %v, %d left; want [2], 0", closed, s.Len())
	}
}
