package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/anycast/birdtest"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// TestAnycastFollowsSnapshotWithBIRD runs the agent's anycast feed against
// a real BGP peer: the snapshot's VIPs are announced as /32s once the
// inputs the agent feeds (proxy readiness, snapshot age, upstream share
// from the proxy's metrics) are up, a new VIP is added by Reconfigure, a
// snapshot without VIPs withdraws nothing, and stop drains and then shuts
// the session down administratively.
func TestAnycastFollowsSnapshotWithBIRD(t *testing.T) {
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{{Name: "site1", Address: "127.0.0.20", AS: 65001}}})
	one := 1
	ac := anycast.Config{LocalAS: 65001, RouterID: "127.0.0.20", SiteID: 1, NextHopV4: "198.51.100.1",
		Peers: []anycast.Peer{{Address: "127.0.0.1", AS: 65000, Port: r.Port, LocalAddress: "127.0.0.20",
			HoldTimeS: 3, KeepaliveS: 1, ConnectRetryS: 1}},
		Inputs: []anycast.Input{
			{Name: InputProxyReady, Kind: anycast.KindBool, Global: true, Rise: 1, Fall: 1},
			{Name: InputSnapshotFresh, Kind: anycast.KindAge, Global: true, MaxAgeMs: 60000, Rise: 1, Fall: 1},
			{Name: InputUpstreams, Kind: anycast.KindShare, Global: true, MinShare: 0.5, Rise: 1, Fall: 1},
		},
		SampleIntervalMs: 100, Drain: anycast.Drain{TimeMs: 2000, Prepend: &one}, Damping: anycast.Damping{HoldDownMs: 100},
		Guard: anycast.Guard{CommunityASN: 64512}, ShutdownMessage: "rampart agent stopping"}
	_, pubPEM, _ := snapshot.GenerateKey()
	pub, _ := snapshot.ParsePublicKey(pubPEM)
	a, err := New(Config{Interfaces: []string{"lo"}, StateDir: t.TempDir(), SnapshotDir: t.TempDir(), PublicKey: pub,
		Anycast: &ac, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE rampart_endpoint_healthy gauge\n"+
			`rampart_endpoint_healthy{cluster="up",endpoint="10.0.0.1:80"} 1`+"\n"+
			`rampart_endpoint_healthy{cluster="up",endpoint="10.0.0.2:80"} 0`+"\n")
	}))
	defer metrics.Close()

	apply := func(seq uint64, vips ...string) {
		c := &snapshot.Config{Clusters: []snapshot.Cluster{{Name: "up", HealthCheck: &snapshot.HealthCheck{Path: "/"},
			Endpoints: []snapshot.Endpoint{{Address: "10.0.0.1:80"}, {Address: "10.0.0.2:80"}}}}}
		c.Listeners = []snapshot.Listener{{Name: "web", Protocols: []string{"http1"}}}
		for _, v := range vips {
			c.L4.VIPs = append(c.L4.VIPs, snapshot.VIP{Address: v, Ports: []snapshot.VIPPort{{Port: 80, Listener: "web"}}})
		}
		l, err := translate(c, a.c.limitsExtra(), 0)
		if err != nil {
			t.Fatal(err)
		}
		act := &activeSnap{snap: &snapshot.Snapshot{Version: snapshot.Version{Epoch: 1, Sequence: seq}, CreatedAt: time.Now(), Config: c}, l4: l}
		a.mu.Lock()
		a.active = act
		a.mu.Unlock()
		a.ac.update(act)
		a.ac.setProxyReady(true, "200 ready")
		a.ac.pollUpstreams(context.Background(), http.DefaultClient, metrics.URL)
	}
	atBIRD := func(net string) bool {
		rts, err := r.Routes()
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range rts {
			if rt.Net == net && rt.Proto == "site1" && !rt.Has("65535:0") {
				return true
			}
		}
		return false
	}
	apply(1, "203.0.113.10")
	took := birdtest.Wait(t, 15*time.Second, "203.0.113.10/32 at BIRD", func() bool { return atBIRD("203.0.113.10/32") })
	t.Logf("FIGURE first snapshot with a VIP -> /32 at BIRD (session setup included): %v", took.Round(time.Millisecond))

	st := a.ac.announcer().Status()
	for _, in := range st.Inputs {
		if !in.Up {
			t.Errorf("input %s down: %s", in.Name, in.Detail)
		}
	}
	apply(2, "203.0.113.10", "203.0.113.11")
	took = birdtest.Wait(t, 15*time.Second, "203.0.113.11/32 at BIRD", func() bool { return atBIRD("203.0.113.11/32") })
	t.Logf("FIGURE snapshot adding a VIP -> its /32 at BIRD: %v", took.Round(time.Millisecond))

	apply(3) // no VIPs at all: refused, both stay announced
	time.Sleep(500 * time.Millisecond)
	if !atBIRD("203.0.113.10/32") || !atBIRD("203.0.113.11/32") {
		t.Fatal("a snapshot without VIPs withdrew them")
	}

	// Stop drains first: BIRD sees both paths with 65535:0 before the
	// session closes, and stop returns only after the drain end (order, not
	// speed).
	drainedAtBIRD := func(net string) bool {
		rts, err := r.Routes()
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range rts {
			if rt.Net == net && rt.Proto == "site1" && rt.Has("65535:0") {
				return true
			}
		}
		return false
	}
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- a.ac.stop() }()
	birdtest.Wait(t, 30*time.Second, "both VIPs drained at BIRD", func() bool {
		return drainedAtBIRD("203.0.113.10/32") && drainedAtBIRD("203.0.113.11/32")
	})
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stop did not return within 30 s")
	}
	returned := time.Now()
	for _, v := range a.ac.announcer().Status().VIPs {
		if v.State != anycast.StateDraining || v.DrainEnd.IsZero() || returned.Before(v.DrainEnd) {
			t.Fatalf("stop returned at %s before the drain of %+v ended", returned.Format(time.RFC3339Nano), v)
		}
	}
	p, err := r.Protocol("site1")
	if err != nil || p.LastError != "Received: Administrative shutdown" || p.Message != "rampart agent stopping" {
		t.Fatalf("BIRD after stop: %+v %v", p, err)
	}
	if atBIRD("203.0.113.10/32") || atBIRD("203.0.113.11/32") {
		t.Fatal("routes left at BIRD after stop")
	}
	t.Logf("FIGURE stop (drain 2 s, then administrative shutdown) took %v", returned.Sub(start).Round(time.Millisecond))
}
