package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/nodeclient"
	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/l7/daemon"
	"github.com/rampart-edge/rampart/l7/proxy"
)

// purgeNode is a node as it runs: a real proxy process (l7/daemon, with
// its purge watcher on -purge-file) and the node client that follows the
// control plane into its snapshot directory and purge file.
type purgeNode struct {
	id     string
	proxy  *proxy.Proxy
	client *nodeclient.Client
	http   *http.Client
}

func startPurgeNode(t *testing.T, controlURL, id string) *purgeNode {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	type started struct {
		p *proxy.Proxy
		a net.Addr
	}
	up := make(chan started, 1)
	done := make(chan error, 1)
	snaps, purgeFile := filepath.Join(dir, "snapshots"), filepath.Join(dir, "purge.json")
	go func() {
		done <- daemon.Run(ctx, daemon.Config{SnapshotDir: snaps, StateDir: filepath.Join(dir, "state"), PublicKey: testPub,
			AdminAddr: "127.0.0.1:0", Logger: quiet, DrainTimeout: time.Second, Poll: 50 * time.Millisecond, PurgeFile: purgeFile,
			Started: func(p *proxy.Proxy, a net.Addr) { up <- started{p, a} }})
	}()
	var s started
	select {
	case s = <-up:
	case err := <-done:
		cancel()
		t.Fatalf("proxy %s: %v", id, err)
	}
	c, err := nodeclient.New(nodeclient.Config{URL: controlURL, Token: nodeToken, PublicKey: testPub,
		Identity:    model.Identity{NodeID: id, Region: "us", Zone: "us-1a"},
		SnapshotDir: snaps, PurgeFile: purgeFile, AdminURL: "http://" + s.a.String(),
		ReportInterval: 100 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	clientDone := make(chan struct{})
	go func() { defer close(clientDone); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-clientDone; <-done })
	return &purgeNode{id: id, proxy: s.p, client: c, http: &http.Client{Transport: &http.Transport{}}}
}

// cacheStatus GETs path from the node's proxy and returns its Cache-Status.
func (n *purgeNode) cacheStatus(t *testing.T, path string) string {
	t.Helper()
	cs, err := n.get(path)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func (n *purgeNode) get(path string) (string, error) {
	a, ok := n.proxy.ListenerAddr("public")
	if !ok {
		return "", fmt.Errorf("node %s: no listener", n.id)
	}
	resp, err := n.http.Get("http://" + a.String() + path)
	if err != nil {
		return "", fmt.Errorf("node %s: GET %s: %w", n.id, path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("Cache-Status"), nil
}

const purgeConfig = `listeners: [{name: public, address: "127.0.0.1:0"}]
clusters: [{name: app, endpoints: [{address: %q}]}]
routes:
  - {id: cached, methods: [GET], path_template: "/c/{p...}", upstream_cluster: app, timeout_ms: 5000, cache: {ttl_ms: 600000}}
`

// The cache purge end to end: a real control plane (both stores), two
// nodes each with a real proxy that cached three objects; a purge by key
// prefix, by surrogate key and by route through POST /v1/purge; both
// proxies miss the purged objects afterwards and keep the others. The
// "< 1 s" requirement is a logged figure (POST → the node client handed
// the document over on both nodes; → both proxies answer the purged
// object with a miss), never asserted.
func TestPurgeReachesProxies(t *testing.T) {
	forEachStore(t, func(t *testing.T, b backend) {
		upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "max-age=600")
			if strings.HasSuffix(r.URL.Path, "/tagged") {
				w.Header().Set("Surrogate-Key", "blog post-1")
			}
			_, _ = io.WriteString(w, "object "+r.URL.Path)
		}))
		t.Cleanup(upstream.Close)
		in := start(t, b.config(t, fast), "")
		in.waitLeader(t, 30*time.Second)
		nodes := []*purgeNode{startPurgeNode(t, in.url, "edge-1"), startPurgeNode(t, in.url, "edge-2")}
		in.submit(t, fmt.Sprintf(purgeConfig, strings.TrimPrefix(upstream.URL, "http://")))
		for _, n := range nodes {
			eventually(t, 30*time.Second, "node "+n.id+" to serve the cached route", func() bool {
				_, ok := n.proxy.ListenerAddr("public")
				return ok
			})
			for _, p := range []string{"/c/a", "/c/b", "/c/tagged"} {
				n.cacheStatus(t, p)
				if cs := n.cacheStatus(t, p); !strings.Contains(cs, "hit") {
					t.Fatalf("node %s: warm %s: Cache-Status %q", n.id, p, cs)
				}
			}
		}
		var figures []string
		for _, c := range []struct {
			what, body, path string
			kept             []string // paths the purge must leave alone
		}{
			{"prefix", `{"prefix": "127.0.0.1/c/a"}`, "/c/a", []string{"/c/b", "/c/tagged"}},
			{"surrogate key", `{"surrogate_key": "post-1"}`, "/c/tagged", []string{"/c/b"}},
			{"route", `{"route": "cached"}`, "/c/b", nil},
		} {
			start := time.Now()
			var res plane.PurgeResult
			if r := in.call(t, adminToken, "POST", "/v1/purge", "application/json", []byte(c.body), nil, &res); r.StatusCode != http.StatusOK {
				t.Fatalf("purge %s: %d %s", c.what, r.StatusCode, bodyOf(r))
			}
			var mu sync.Mutex
			var handed, missed time.Duration
			var wg sync.WaitGroup
			for _, n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want := fmt.Sprintf("1.%d", res.Sequence)
					handedAt := time.Duration(0)
					deadline := time.Now().Add(30 * time.Second)
					for time.Now().Before(deadline) {
						if handedAt == 0 && n.client.Status().Purge == want {
							handedAt = time.Since(start)
						}
						cs, err := n.get(c.path)
						if err != nil {
							t.Error(err)
							return
						}
						if strings.Contains(cs, "fwd=miss") {
							d := time.Since(start)
							if handedAt == 0 {
								handedAt = d
							}
							mu.Lock()
							handed, missed = max(handed, handedAt), max(missed, d)
							mu.Unlock()
							return
						}
						time.Sleep(2 * time.Millisecond)
					}
					t.Errorf("node %s: %s purge: %s still a hit after 30 s", n.id, c.what, c.path)
				}()
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			for _, n := range nodes {
				for _, p := range c.kept {
					if cs := n.cacheStatus(t, p); !strings.Contains(cs, "hit") {
						t.Fatalf("node %s: the %s purge took %s too: %q", n.id, c.what, p, cs)
					}
				}
			}
			figures = append(figures, fmt.Sprintf("%s %d/%d ms", c.what, handed.Milliseconds(), missed.Milliseconds()))
		}
		t.Logf("FIGURE purge delivery (%s store, 2 nodes with real proxies): POST /v1/purge → handed over on both / both proxies miss: %s (requirement: < 1000 ms)",
			b.name, strings.Join(figures, ", "))
	})
}
