package proxy

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func wsEcho(t *testing.T) *testUpstream {
	up := websocket.Upgrader{}
	return startUpstream(t, "ws", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			return
		}
		c, err := up.Upgrade(w, r, http.Header{"X-Echo": {"yes"}})
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	})
}

func TestWebSocketThroughTheProxy(t *testing.T) {
	l := newLab(t)
	up := wsEcho(t)
	oneCluster(l, nil, nil, up.Addr())
	for _, tc := range []struct{ name, url string }{
		{"ws", "ws://" + l.addr("http") + "/chat"},
		{"wss", "wss://" + l.addr("https") + "/chat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: l.roots, ServerName: "localhost"}, HandshakeTimeout: 5 * time.Second}
			c, resp, err := d.Dial(tc.url, nil)
			if err != nil {
				t.Fatalf("dial: %v (response %v)", err, resp)
			}
			defer c.Close()
			if resp.Header.Get("X-Echo") != "yes" || resp.Header.Get("X-Request-Id") == "" {
				t.Errorf("101 headers %v", resp.Header)
			}
			for i, msg := range []string{"hello", strings.Repeat("x", 100_000), "bye"} {
				if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
					t.Fatal(err)
				}
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
				_, got, err := c.ReadMessage()
				if err != nil || string(got) != "echo: "+msg {
					t.Fatalf("message %d: %q %v", i, truncate(string(got)), err)
				}
			}
			if n := l.p.tunnels.len(); n != 1 {
				t.Errorf("%d tunnels open, want 1", n)
			}
			c.Close()
			eventually(t, 30*time.Second, "the tunnel to close", func() bool { return l.p.tunnels.len() == 0 })
		})
	}
	if n := testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("r", "app", "101")); n != 2 {
		t.Errorf("101s counted: %v", n)
	}
}

func TestUpgradeRefusedByUpstreamIsAPlainResponse(t *testing.T) {
	l := newLab(t)
	up := wsEcho(t)
	oneCluster(l, nil, nil, up.Addr())
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	_, resp, err := d.Dial("ws://"+l.addr("http")+"/plain", nil)
	if err == nil || resp == nil || resp.StatusCode != 200 {
		t.Fatalf("want a plain 200 and a failed handshake, got %v %v", resp, err)
	}
	// The connection stays usable for plain HTTP afterwards.
	if code, _ := status(t, l.url("http", "/plain")); code != 200 {
		t.Fatalf("%d", code)
	}
}

func TestShutdownClosesTunnels(t *testing.T) {
	l := newLab(t)
	up := wsEcho(t)
	oneCluster(l, nil, nil, up.Addr())
	c, _, err := websocket.DefaultDialer.Dial("ws://"+l.addr("http")+"/chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eventually(t, 30*time.Second, "a tunnel", func() bool { return l.p.tunnels.len() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = l.p.Shutdown(ctx) // the tunnel holds the drain to its deadline, then is closed
	// The client's own deadline is a liveness bound: its firing would mean
	// the proxy never closed the tunnel, so it does not count as a close.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("the tunnel survived the shutdown")
	} else if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
		t.Fatalf("the tunnel was not closed by the shutdown: %v", err)
	}
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

var _ = snapshot.Version{}
