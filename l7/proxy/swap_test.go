package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Every response during a swap comes from the old or the new snapshot's
// upstream, nothing fails, and once the swap is done only the new one serves.
func TestSnapshotSwapUnderLoad(t *testing.T) {
	l := newLab(t)
	v1 := startUpstream(t, "v1", nil)
	v2 := startUpstream(t, "v2", nil)
	cfg := func(target string) *snapshot.Config {
		c := l.config()
		c.Clusters = []snapshot.Cluster{clusterOf("v1", v1.Addr()), clusterOf("v2", v2.Addr())}
		c.Routes = []snapshot.Route{getRoute("r", "/x", target)}
		return c
	}
	l.apply(cfg("v1"))
	url := l.url("https", "/x")

	var stop atomic.Bool
	var swapped atomic.Bool
	var total, failed, afterSwapOld atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := 0; w < 8; w++ {
		client := l.h2()
		if w%2 == 0 {
			client = l.h1()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				sawSwap := swapped.Load()
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				total.Add(1)
				up := resp.Header.Get("X-Upstream")
				switch {
				case resp.StatusCode != 200 || (up != "v1" && up != "v2") || string(b) != up+" /x":
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("status %d upstream %q body %q", resp.StatusCode, up, b))
				case sawSwap && up == "v1":
					afterSwapOld.Add(1)
				}
			}
		}()
	}
	// Load on both sides of the swap, by count (a busy box may need long
	// for the first TLS handshakes; the deadlines are liveness bounds).
	eventually(t, 30*time.Second, "requests before the swap", func() bool { return total.Load() >= 20 || failed.Load() > 0 })
	before := total.Load()
	l.apply(cfg("v2"))
	swapped.Store(true)
	eventually(t, 30*time.Second, "requests after the swap", func() bool { return v2.Count() >= 20 || failed.Load() > 0 })
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed; first: %v", failed.Load(), total.Load(), firstErr.Load())
	}
	if afterSwapOld.Load() != 0 {
		t.Fatalf("%d requests started after the swap were served by the old snapshot", afterSwapOld.Load())
	}
	if v1.Count() == 0 || v2.Count() == 0 || before == 0 {
		t.Fatalf("v1 %d v2 %d: the load did not span the swap", v1.Count(), v2.Count())
	}
	t.Logf("%d requests, %d before the swap, 0 failed", total.Load(), before)
}

// A request in flight when the snapshot changes finishes on the snapshot
// it started with.
func TestInFlightRequestFinishesOnOldSnapshot(t *testing.T) {
	l := newLab(t)
	release := make(chan struct{})
	slow := startUpstream(t, "old", func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = io.WriteString(w, "old")
	})
	fresh := startUpstream(t, "new", nil)
	cfg := func(target string) *snapshot.Config {
		c := l.config()
		c.Clusters = []snapshot.Cluster{clusterOf("old", slow.Addr()), clusterOf("new", fresh.Addr())}
		c.Routes = []snapshot.Route{getRoute("r", "/x", target)}
		return c
	}
	l.apply(cfg("old"))
	done := make(chan string, 1)
	go func() {
		resp, err := http.Get(l.url("http", "/x"))
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- string(b)
	}()
	eventually(t, 30*time.Second, "the slow request to arrive", func() bool { return slow.Count() == 1 })
	l.apply(cfg("new"))
	if _, body, _ := get(t, http.DefaultClient, l.url("http", "/x")); body != "new /x" {
		t.Fatalf("new request got %q", body)
	}
	close(release)
	if got := <-done; got != "old" {
		t.Fatalf("in-flight request got %q", got)
	}
}

func TestApplyRefusesOlderOrEqualVersion(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Version = snapshot.Version{Epoch: 2, Sequence: 5}
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	for _, v := range []snapshot.Version{{Epoch: 2, Sequence: 5}, {Epoch: 2, Sequence: 4}, {Epoch: 1, Sequence: 99}} {
		c2 := l.config(up.Addr())
		c2.Version = v
		c2.Routes = []snapshot.Route{getRoute("r", "/y", "app")}
		if err := l.p.Apply(l.snap(c2)); !errors.Is(err, ErrStale) {
			t.Errorf("version %s: want ErrStale, got %v", v, err)
		}
	}
	if l.p.Active().Snap.Version != (snapshot.Version{Epoch: 2, Sequence: 5}) {
		t.Fatal("active version changed")
	}
}

// A snapshot whose certificate cannot be loaded is refused and the old one
// keeps serving.
func TestApplyWithBrokenCertificateKeepsOldSnapshot(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	bad := l.config(up.Addr())
	bad.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	bad.Listeners[0].TLS.Certificates[0].CertFile = "/nonexistent.crt"
	if err := l.p.Apply(l.snap(bad)); err == nil {
		t.Fatal("a snapshot with a missing certificate was applied")
	}
	if code, _, _ := get(t, l.h1(), l.url("https", "/x")); code != 200 {
		t.Fatalf("old snapshot stopped serving: %d", code)
	}
}

// Changing listener settings keeps the socket (no refused connections) and
// applies the new limits to new connections.
func TestListenerSettingsChangeKeepsSocket(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	before := l.addr("https")
	c2 := l.config(up.Addr())
	c2.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	c2.Listeners[0].MaxHeaderBytes = 2048
	l.apply(c2)
	if l.addr("https") != before {
		t.Fatalf("listener moved from %s to %s", before, l.addr("https"))
	}
	req, _ := http.NewRequest("GET", l.url("https", "/x"), nil)
	req.Header.Set("X-Big", string(make([]byte, 0))+fmt.Sprintf("%010000d", 1))
	resp, err := l.h1().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("10 KB header with max_header_bytes 2048: status %d", resp.StatusCode)
	}
}
