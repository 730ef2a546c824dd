package proxy

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// startRedis runs a throwaway redis-server on a free loopback port.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is missing (hack/deps.sh test installs it): %v", err)
		}
		t.Skip("redis-server not installed (run hack/deps.sh test)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, 30*time.Second, "redis to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// Two proxies sharing one Redis admit, together, what one regional budget
// allows.
func TestTwoProxiesShareARegionalQuota(t *testing.T) {
	redis := startRedis(t)
	up := startUpstream(t, "app", nil)
	const burst = 20
	var labs []*lab
	for i := 0; i < 2; i++ {
		l := newLab(t)
		l.setRegion("eu")
		c := l.config(up.Addr())
		// The Redis timeout is the most the config allows (5 s): with
		// fail_mode closed a call that a loaded box makes late would be
		// refused and the two proxies would admit less than the burst.
		c.QuotaPolicies = []snapshot.QuotaPolicy{{ID: "shared", Key: []string{"header:X-Customer"}, Burst: burst,
			Regional: &snapshot.Regional{GlobalRatePerSecond: 4, Shares: map[string]float64{"eu": 0.5, "us": 0.5}},
			Store:    "redis", Redis: &snapshot.RedisStore{Address: redis, TimeoutMs: 5000, FailMode: "closed"}}}
		r := getRoute("r", "/x", "app")
		r.QuotaPolicyID = "shared"
		c.Routes = []snapshot.Route{r}
		l.apply(c)
		labs = append(labs, l)
	}
	start := time.Now()
	var ok atomic.Int32
	var wg sync.WaitGroup
	for _, l := range labs {
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if r := do(t, l.url("http", "/x"), map[string]string{"X-Customer": "acme"}); r.StatusCode == 200 {
						ok.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	// Regional rate 4 × 0.5 = 2/s on top of the burst.
	limit := burst + int(2*time.Since(start).Seconds()) + 1
	if got := int(ok.Load()); got > limit || got < burst {
		t.Fatalf("the two proxies admitted %d of 120, want %d..%d", got, burst, limit)
	}
	t.Logf("admitted %d of 120 across two proxies (bound %d)", ok.Load(), limit)
}
