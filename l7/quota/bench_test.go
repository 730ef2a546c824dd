package quota

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func BenchmarkTakeLocal(b *testing.B) {
	l := mustNew(b, []snapshot.QuotaPolicy{localPolicy("p", 1e6, 1000)}, "", nil, Options{})
	key := []byte("tenant-1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.Take(ctx, "p", key)
	}
}

func BenchmarkTakeLocalParallel(b *testing.B) {
	l := mustNew(b, []snapshot.QuotaPolicy{localPolicy("p", 1e6, 1000)}, "", nil, Options{})
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "tenant-%d", i)
	}
	var next atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 97
		for pb.Next() {
			l.Take(ctx, "p", keys[i%len(keys)])
			i++
		}
	})
}

func BenchmarkTakeRedis(b *testing.B) {
	srv := startRedis(b)
	l := mustNew(b, []snapshot.QuotaPolicy{redisQuota("p", srv.addr, 1e6, 1000, "closed", 1000)}, "eu", nil, Options{})
	key := []byte("tenant-1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d := l.Take(ctx, "p", key); d.Degraded {
			b.Fatal("degraded")
		}
	}
}

func BenchmarkBuildKey(b *testing.B) {
	src := &testSource{tenant: "acme", ip: "192.0.2.7", claims: map[string]string{"sub": "alice"},
		headers: map[string]string{"X-User": "bob"}}
	parts := []string{"tenant", "claim:sub", "header:X-User", "client_ip"}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = BuildKey(parts, src, buf)
	}
}
