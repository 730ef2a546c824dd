package proxy

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// wsTunnel opens a WebSocket through the proxy to an echo upstream, with
// the listeners' tunnel_idle_timeout_ms set.
func wsTunnel(t *testing.T, idleMs int) (*lab, *websocket.Conn) {
	l := newLab(t)
	up := wsEcho(t)
	c := l.config(up.Addr())
	for i := range c.Listeners {
		c.Listeners[i].TunnelIdleTimeoutMs = idleMs
	}
	c.Routes = append(c.Routes, getRoute("r", "/{rest...}", "app"))
	l.apply(c)
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+l.addr("http")+"/chat", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return l, ws
}

func echo(t *testing.T, ws *websocket.Conn, msg string) {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	if _, got, err := ws.ReadMessage(); err != nil || string(got) != "echo: "+msg {
		t.Fatalf("echo of %q: %q %v", msg, got, err)
	}
}

// A tunnel with no byte either way for the idle time is closed on both
// sides and counted; the open-tunnel gauge goes back to zero.
func TestIdleTunnelIsClosed(t *testing.T) {
	l, ws := wsTunnel(t, 1000)
	echo(t, ws, "hello")
	if n := l.p.tunnels.len(); n != 1 {
		t.Fatalf("%d tunnels open, want 1", n)
	}
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("a message came out of an idle tunnel")
	} else if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
		t.Fatal("the idle tunnel was not closed")
	}
	eventually(t, 30*time.Second, "the tunnel gauge back to 0", func() bool { return l.p.tunnels.len() == 0 })
	waitFree(t, l) // the upstream connection and every request slot are released too
	if n := testutil.ToFloat64(l.p.metrics.tunnelIdle); n != 1 {
		t.Errorf("rampart_websocket_tunnels_idle_closed_total = %v, want 1", n)
	}
}

// Traffic keeps a tunnel open past its idle time: only silence counts.
func TestBusyTunnelStaysOpen(t *testing.T) {
	// A 5 s idle time with a message every 100 ms: only a box that stalls
	// the test for 50 message periods would see a gap (with 2 s, a loaded
	// box could stall an echo that long and the tunnel closes).
	l, ws := wsTunnel(t, 5000)
	// Messages every 100 ms for 2 idle periods.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		echo(t, ws, "ping")
	}
	if n := testutil.ToFloat64(l.p.metrics.tunnelIdle); n != 0 {
		t.Errorf("rampart_websocket_tunnels_idle_closed_total = %v with traffic, want 0", n)
	}
	if n := l.p.tunnels.len(); n != 1 {
		t.Errorf("%d tunnels open, want 1", n)
	}
}
