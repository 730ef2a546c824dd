package h2

import (
	"context"
	"sync"
	"time"
)

// streamCtx is a request's context, part of its stream: it is canceled
// when the stream is reset, the connection ends or the handler returns.
// Its Done channel is made only when asked for, and it offers AfterFunc,
// so contexts derived from it (context.WithDeadline in the proxy) register
// a callback instead of starting a goroutine to watch it. It replaces a
// context.WithCancel per stream (two allocations, a lock on the parent).
type streamCtx struct {
	parent context.Context // values and deadline

	mu    sync.Mutex
	done  chan struct{}
	err   error
	funcs []*afterEntry
}

type afterEntry struct {
	f    func()
	done bool
}

func (x *streamCtx) Deadline() (time.Time, bool) { return x.parent.Deadline() }
func (x *streamCtx) Value(key any) any           { return x.parent.Value(key) }

func (x *streamCtx) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done == nil {
		x.done = make(chan struct{})
		if x.err != nil {
			close(x.done)
		}
	}
	return x.done
}

func (x *streamCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

// AfterFunc is what context.AfterFunc and the context package's
// propagation use on contexts that offer it.
func (x *streamCtx) AfterFunc(f func()) (stop func() bool) {
	e := &afterEntry{f: f}
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	x.funcs = append(x.funcs, e)
	x.mu.Unlock()
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		if e.done {
			return false
		}
		e.done = true
		return true
	}
}

// reset makes a canceled context new again for a reused stream; its
// parent, set once, is left alone.
func (x *streamCtx) reset() {
	x.mu.Lock()
	x.done, x.err, x.funcs = nil, nil, nil
	x.mu.Unlock()
}

func (x *streamCtx) cancel() {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = context.Canceled
	if x.done != nil {
		close(x.done)
	}
	funcs := x.funcs
	x.funcs = nil
	var run []func()
	for _, e := range funcs {
		if !e.done {
			e.done = true
			run = append(run, e.f)
		}
	}
	x.mu.Unlock()
	for _, f := range run {
		go f()
	}
}
