package anycast

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rampart-edge/rampart/anycast/birdtest"
)

// The lab: BIRD on 127.0.0.1 (AS 65000), site N speaks from 127.0.0.(N+1)
// as AS 65000+N with next hops 198.51.100.N and fd00::N.

func ptr[T any](v T) *T { return &v }

func sitePeer(id uint32) birdtest.Peer {
	return birdtest.Peer{Name: fmt.Sprintf("site%d", id), Address: fmt.Sprintf("127.0.0.%d", id+1), AS: 65000 + id}
}

func siteConfig(r *birdtest.Router, id uint32, vips ...VIP) Config {
	addr := fmt.Sprintf("127.0.0.%d", id+1)
	return Config{LocalAS: 65000 + id, RouterID: addr, SiteID: id,
		NextHopV4: fmt.Sprintf("198.51.100.%d", id), NextHopV6: fmt.Sprintf("fd00::%d", id),
		Peers: []Peer{{Address: "127.0.0.1", AS: 65000, Port: r.Port, LocalAddress: addr,
			HoldTimeS: 3, KeepaliveS: 1, ConnectRetryS: 1}},
		VIPs:             vips,
		Inputs:           []Input{{Name: "ready", Global: true, Rise: 2, Fall: 2}},
		SampleIntervalMs: 100,
		Drain:            Drain{TimeMs: 1500, Prepend: ptr(2)},
		Damping:          Damping{HoldDownMs: 300},
		Guard:            Guard{CommunityASN: 64512, MinSites: ptr(1)},
		ShutdownMessage:  fmt.Sprintf("site %d going down for maintenance", id),
	}
}

type site struct {
	*Announcer
	reg *prometheus.Registry
}

// startSite starts an announcer with its input up; it is stopped (with
// a short deadline) when the test ends.
func startSite(t *testing.T, c Config, fleet FleetView) *site {
	return startSiteWith(t, c, fleet, true)
}

// startSiteWith starts an announcer with its input up or down. Tests that
// run several speakers in one process start them all with the input down
// and raise it after: GoBGP keeps its route-selection options in package
// variables that every BgpServer's StartBgp writes while the others' best
// path computations read them (a data race inside GoBGP that one speaker
// per process, as in the agent, never meets).
func startSiteWith(t *testing.T, c Config, fleet FleetView, up bool) *site {
	t.Helper()
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("site", c.SiteID)
	a, err := New(c, Options{Registerer: reg, Logger: log, Fleet: fleet})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetUp("ready", up, "test"); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = a.Stop(ctx)
	})
	return &site{a, reg}
}

// testWriter logs through t, and not at all once the test is over.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if os.Getenv("ANYCAST_LAB_LOG") != "" {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (s *site) vip(prefix string) VIPStatus {
	for _, v := range s.Status().VIPs {
		if v.Prefix == prefix {
			return v
		}
	}
	panic("no vip " + prefix)
}

func (s *site) metric(t *testing.T, name, vip, to string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["vip"] == vip && (to == "" || labels["to"] == to) {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// stateMetric is the value of a vip_state gauge for vip in state (0 when absent).
func (s *site) stateMetric(t *testing.T, name, vip, state string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if mf.GetName() == name && labels["vip"] == vip && labels["state"] == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// routes returns BIRD's paths for net (one per announcing site).
func routes(t *testing.T, r *birdtest.Router, net string) []birdtest.Route {
	t.Helper()
	all, err := r.Routes()
	if err != nil {
		t.Fatal(err)
	}
	var out []birdtest.Route
	for _, rt := range all {
		if rt.Net == net {
			out = append(out, rt)
		}
	}
	return out
}

func fromSite(rs []birdtest.Route, id uint32) (birdtest.Route, bool) {
	for _, r := range rs {
		if r.Proto == fmt.Sprintf("site%d", id) {
			return r, true
		}
	}
	return birdtest.Route{}, false
}

// drainedRoute says whether r looks drained: graceful shutdown, the site's
// AS prepended twice more, and the site community in state 2 or 3.
func drainedRoute(r birdtest.Route, id uint32, state int) bool {
	as := 65000 + id
	return r.Has("65535:0") && slices.Equal(r.ASPath, []uint32{as, as, as}) &&
		slices.Contains(r.LargeCommunities, fmt.Sprintf("64512:%d:%d", state, id))
}

func established(r *birdtest.Router, name string) bool {
	p, err := r.Protocol(name)
	return err == nil && p.BGPState == "Established"
}

func figure(t *testing.T, what string, d time.Duration) {
	t.Helper()
	t.Logf("FIGURE %s: %s", what, d.Round(time.Millisecond))
}
