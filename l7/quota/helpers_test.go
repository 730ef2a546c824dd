package quota

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// fakeClock is a controllable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testSource is a Source from plain fields; a nil map means nothing there.
type testSource struct {
	tenant, keyID, ip string
	claims, params    map[string]string
	headers           map[string]string
}

func (s *testSource) Tenant() string   { return s.tenant }
func (s *testSource) KeyID() string    { return s.keyID }
func (s *testSource) ClientIP() string { return s.ip }
func (s *testSource) Header(name string) string {
	return s.headers[name]
}
func (s *testSource) Claim(name string) (string, bool) {
	v, ok := s.claims[name]
	return v, ok
}
func (s *testSource) Param(name string) (string, bool) {
	v, ok := s.params[name]
	return v, ok
}

func localPolicy(id string, rate float64, burst int) snapshot.QuotaPolicy {
	return snapshot.QuotaPolicy{ID: id, Key: []string{"tenant"}, RatePerSecond: rate, Burst: burst, Store: "local"}
}

func redisQuota(id, addr string, rate float64, burst int, failMode string, timeoutMs int) snapshot.QuotaPolicy {
	return snapshot.QuotaPolicy{ID: id, Key: []string{"tenant"}, RatePerSecond: rate, Burst: burst, Store: "redis",
		Redis: &snapshot.RedisStore{Address: addr, TimeoutMs: timeoutMs, FailMode: failMode}}
}

func mustNew(tb testing.TB, policies []snapshot.QuotaPolicy, region string, prev *Limiter, opts Options) *Limiter {
	tb.Helper()
	l, err := New(policies, region, prev, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// countAllowed takes n tokens of key and returns how many were admitted.
func countAllowed(l *Limiter, policy, key string, n int) int {
	got := 0
	for range n {
		if l.Take(context.Background(), policy, []byte(key)).Allowed {
			got++
		}
	}
	return got
}

// redisServer is a real redis-server on a free loopback port.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
}

const redisBinary = "/usr/bin/redis-server"

// startRedis starts a redis-server for tb and stops it at the end. Without
// the binary it skips, or fails when CI is set.
func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	if _, err := os.Stat(redisBinary); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is missing (CI): %v", redisBinary, err)
		}
		tb.Skipf("needs %s (apt-get install redis-server): %v", redisBinary, err)
	}
	var lastErr error
	for range 3 {
		s, err := tryStartRedis(tb)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

func tryStartRedis(tb testing.TB) (*redisServer, error) {
	addr := freeAddr(tb)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(redisBinary, "--save", "", "--appendonly", "no", "--port", port,
		"--bind", "127.0.0.1", "--dir", tb.TempDir(), "--loglevel", "warning")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s := &redisServer{addr: addr, cmd: cmd}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return nil, fmt.Errorf("redis-server on %s exited: %s", addr, out.String())
		default:
		}
		if ping(addr) == nil {
			tb.Cleanup(func() {
				cmd.Process.Signal(syscall.SIGCONT)
				cmd.Process.Kill()
				<-exited
			})
			return s, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	<-exited
	return nil, fmt.Errorf("redis-server on %s did not answer PING: %s", addr, out.String())
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// freeAddr is a loopback address nothing listens on (for now).
func freeAddr(tb testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func (s *redisServer) stop() {
	s.cmd.Process.Kill()
	for ping(s.addr) == nil {
		time.Sleep(5 * time.Millisecond)
	}
}
func (s *redisServer) pause()  { s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *redisServer) resume() { s.cmd.Process.Signal(syscall.SIGCONT) }
