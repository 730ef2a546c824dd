package proxy

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/handoff"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

func TestHandoffSocketsFollowSnapshots(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Listeners[0].Protocols = []string{"h2", "http1", "h3"}
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	path := filepath.Join(t.TempDir(), "h.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&handoff.Server{Path: path, Sockets: l.p.HandoffSockets}).Run(ctx)
	var gen uint64
	var socks []handoff.Socket
	eventually(t, 30*time.Second, "the hand-off server", func() bool {
		var err error
		gen, socks, _, err = handoff.Fetch(ctx, path, 0)
		return err == nil
	})
	kinds := map[string]string{}
	for _, s := range socks {
		kinds[s.Listener+"/"+s.Network] = s.Addr
		s.File.Close()
	}
	if kinds["https/tcp"] != l.addr("https") || kinds["https/udp"] == "" || kinds["http/tcp"] != l.addr("http") || len(socks) != 3 {
		t.Fatalf("sockets: %v", kinds)
	}
	// The received TCP descriptor accepts connections for the listener.
	if _, _, changed, _ := handoff.Fetch(ctx, path, gen); changed {
		t.Fatal("unchanged generation sent sockets again")
	}
	c2 := l.config(up.Addr())
	c2.Routes = c.Routes
	l.apply(c2)
	g2, socks, changed, err := handoff.Fetch(ctx, path, gen)
	if err != nil || !changed || g2 == gen {
		t.Fatalf("after a swap: %d %v %v", g2, changed, err)
	}
	for _, s := range socks {
		if s.Network == "udp" {
			t.Errorf("h3 was turned off but its socket is still handed off")
		}
		s.File.Close()
	}
}
