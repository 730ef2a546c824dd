package upstream

import (
	"context"
	"net"
	"testing"
	"time"
)

// BenchmarkTakeIdle is one Get that reuses the idle connection and its
// Release: the pool's own cost per reused request, liveness check included.
func BenchmarkTakeIdle(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c
		}
	}()
	p := NewPool(ln.Addr().String(), PoolConfig{})
	defer p.Close()
	ctx := context.Background()
	c, err := p.Get(ctx, time.Now().Add(10*time.Second), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { (<-held).Close() }()
	c.Release(true)
	b.ReportAllocs()
	for b.Loop() {
		c, err := p.Get(ctx, time.Time{}, 0)
		if err != nil || !c.Reused {
			b.Fatalf("get: %v (reused %v)", err, c != nil && c.Reused)
		}
		c.Release(true)
	}
	if st := p.Stats(); st.Dials != 1 {
		b.Fatalf("%d dials, want 1", st.Dials)
	}
}
