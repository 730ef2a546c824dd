package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// At twice the global concurrency limit the excess gets 503 at once — every
// shed answer arrives while the admitted requests are still held at the
// upstream, so shedding never waits for it — the admitted requests are
// answered once it lets go, and memory stays flat.
func TestLoadSheddingAtTwiceTheLimit(t *testing.T) {
	const limit, clients = 50, 100
	l := newLab(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	defer letGo() // before the upstream's cleanup waits for its handlers
	up := startUpstream(t, "slow", func(w http.ResponseWriter, r *http.Request) { <-release })
	c := l.config(up.Addr())
	c.Limits.MaxConcurrentRequests = limit
	r := getRoute("r", "/x", "app")
	r.TimeoutMs = 60000 // the upstream is held until the test saw every shed answer
	c.Routes = []snapshot.Route{r}
	l.apply(c)

	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			for p := peak.Load(); ms.HeapInuse > p && !peak.CompareAndSwap(p, ms.HeapInuse); p = peak.Load() {
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var ok, shed, okBeforeRelease atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Get(l.url("http", "/x"))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				select {
				case <-release:
				default:
					okBeforeRelease.Add(1)
				}
				ok.Add(1)
			case 503:
				shed.Add(1)
			default:
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	close(start)
	// Every request beyond the limit is answered while the admitted ones
	// are still held at the upstream (a liveness deadline, not a speed bound).
	eventually(t, 30*time.Second, "every shed answer while the upstream holds the admitted requests", func() bool {
		return shed.Load() >= clients-limit
	})
	if ok.Load() != 0 {
		t.Fatalf("%d requests answered 200 while the upstream was held", ok.Load())
	}
	letGo()
	wg.Wait()
	close(stop)
	if ok.Load() != limit || shed.Load() != clients-limit || okBeforeRelease.Load() != 0 {
		t.Fatalf("%d served (%d before the upstream let go), %d shed; want %d served after it let go and %d shed",
			ok.Load(), okBeforeRelease.Load(), shed.Load(), limit, clients-limit)
	}
	if got := testutil.ToFloat64(l.p.metrics.shed.WithLabelValues("global")); int(got) != int(shed.Load()) {
		t.Errorf("shed metric %v, clients saw %d", got, shed.Load())
	}
	t.Logf("%d served, %d shed, peak heap in use %.1f MiB", ok.Load(), shed.Load(), float64(peak.Load())/(1<<20))
}

func TestRouteConcurrencyLimit(t *testing.T) {
	l := newLab(t)
	release := make(chan struct{})
	up := startUpstream(t, "slow", func(w http.ResponseWriter, r *http.Request) { <-release })
	c := l.config(up.Addr())
	limited := getRoute("limited", "/limited", "app")
	limited.MaxConcurrentRequests = 1
	c.Routes = []snapshot.Route{limited, getRoute("free", "/free", "app")}
	l.apply(c)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); status(t, l.url("http", "/limited")) }()
	eventually(t, 30*time.Second, "the first request upstream", func() bool { return up.Count() == 1 })
	if code, _ := status(t, l.url("http", "/limited")); code != 503 {
		t.Fatalf("second request on a route limited to 1: %d", code)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if code, _ := status(t, l.url("http", "/free")); code != 200 {
			t.Errorf("another route was limited too: %d", code)
		}
	}()
	eventually(t, 30*time.Second, "the other route's request upstream", func() bool { return up.Count() == 2 })
	close(release)
	wg.Wait()
	if testutil.ToFloat64(l.p.metrics.shed.WithLabelValues("route")) != 1 {
		t.Error("route shed not counted")
	}
	if testutil.ToFloat64(l.p.metrics.faults.WithLabelValues("limited", "gateway")) != 1 {
		t.Error("a shed is the gateway's fault")
	}
}

// An upstream that accepts and never answers costs the client the route
// timeout and no more.
func TestBlackholeUpstreamBoundedByDeadline(t *testing.T) {
	l := newLab(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c) // reads, never writes
		}
	}()
	oneCluster(l, nil, func(r *snapshot.Route) { r.TimeoutMs = 300 }, ln.Addr().String())
	t0 := time.Now()
	// The client's 30 s timeout is a liveness bound: the route timeout must
	// answer long before it.
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(l.url("http", "/x"))
	if err != nil {
		t.Fatalf("blackhole: no answer from the proxy: %v", err)
	}
	resp.Body.Close()
	t.Logf("504 after %s with a 300 ms route timeout", time.Since(t0).Round(time.Millisecond))
	if resp.StatusCode != 504 {
		t.Fatalf("blackhole: %d, want 504 from the 300 ms route timeout", resp.StatusCode)
	}
	if testutil.ToFloat64(l.p.metrics.upstreamErrors.WithLabelValues("app", "timeout")) != 1 {
		t.Error("timeout not counted")
	}
}

// Shutting down under load: every request that reached the upstream gets
// its answer; requests after the listener closed are refused, never cut.
func TestDrainUnderLoadLosesNoAdmittedRequest(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		io.WriteString(w, "done")
	})
	oneCluster(l, nil, nil, up.Addr())
	var completed, refused atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 8; i++ {
		client := l.h1()
		if i%2 == 1 {
			client = l.h2()
		}
		url := l.url("https", "/x")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get(url)
				if err != nil {
					refused.Add(1)
					time.Sleep(5 * time.Millisecond)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != "done" || resp.StatusCode != 200 {
					t.Errorf("an admitted request was cut: status %d body %q err %v", resp.StatusCode, b, err)
					continue
				}
				completed.Add(1)
			}
		}()
	}
	eventually(t, 30*time.Second, "requests completing before the drain", func() bool { return completed.Load() >= 8 })
	// A liveness bound for the drain, not a speed bound: a busy box may need
	// seconds, and a forced close at the deadline would cut admitted requests.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := l.p.Shutdown(ctx); err != nil {
		t.Fatalf("drain did not finish: %v", err)
	}
	close(stop)
	wg.Wait()
	if int(completed.Load()) != up.Count() {
		t.Fatalf("upstream served %d requests, clients completed %d: admitted requests were lost", up.Count(), completed.Load())
	}
	if l.p.Ready() {
		t.Error("ready after shutdown")
	}
	t.Logf("%d completed, %d refused after the drain began", completed.Load(), refused.Load())
}
