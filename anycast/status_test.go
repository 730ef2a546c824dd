package anycast

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rampart-edge/rampart/anycast/birdtest"
)

func dryConfig() Config {
	c := unitConfig(1)
	c.DryRun = DryRunNoBGP
	c.SampleIntervalMs = 50
	c.Drain.TimeMs = 1000
	c.Inputs = append(c.Inputs, Input{Name: "api_upstreams", Kind: KindShare, MinShare: 0.5, Rise: 1, Fall: 1},
		Input{Name: "snapshot_fresh", Kind: KindAge, Global: true, MaxAgeMs: 60000, Rise: 1, Fall: 1})
	c.Inputs[0].Rise, c.Inputs[0].Fall = 1, 1
	c.VIPs[0].Inputs = []string{"api_upstreams"}
	c.VIPs = append(c.VIPs, VIP{Prefix: "2001:db8::10/128"})
	c.NextHopV6 = "2001:db8::1"
	return c
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	birdtest.Wait(t, 10*time.Second, what, f)
}

func TestSetters(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := New(dryConfig(), Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(dryConfig(), Options{Registerer: reg}); err == nil {
		t.Fatal("two announcers registered the same metrics")
	}
	defer func() {
		_ = a.Stop(context.Background())
		if _, err := New(dryConfig(), Options{Registerer: reg}); err != nil {
			t.Fatalf("a new announcer after Stop: %v", err)
		}
	}()
	for _, err := range []error{
		a.SetUp("nope", true, ""),
		a.SetUp("api_upstreams", true, ""),
		a.SetShare("ready", 1, 1),
		a.SetShare("api_upstreams", 3, 2),
		a.SetTime("ready", time.Now()),
	} {
		if err == nil {
			t.Error("a wrong setter call succeeded")
		}
	}
	if err := a.SetShare("api_upstreams", 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.SetTime("snapshot_fresh", time.Now()); err != nil {
		t.Fatal(err)
	}
}

// TestDryRunStatusAndCommand: with dry_run no_bgp every decision is made
// and shown, nothing is sent; the status handler serves it and Command
// prints it.
func TestDryRunStatusAndCommand(t *testing.T) {
	var polled atomic.Int64
	reg := prometheus.NewRegistry()
	a, err := New(dryConfig(), Options{Registerer: reg,
		Fleet: func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 2, State: SiteUp}} }})
	if err != nil {
		t.Fatal(err)
	}
	_ = a.SetFunc("ready", func() (bool, string) { polled.Add(1); return true, "polled" })
	_ = a.SetShare("api_upstreams", 3, 4)
	_ = a.SetTime("snapshot_fresh", time.Now())
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	s := &site{a, reg}
	waitFor(t, "both VIPs decided announced", func() bool {
		return s.vip("192.0.2.10/32").State == StateAnnounced && s.vip("2001:db8::10/128").State == StateAnnounced
	})
	if polled.Load() == 0 {
		t.Fatal("SetFunc never polled")
	}
	_ = a.SetShare("api_upstreams", 1, 4) // below half: only the IPv4 VIP needs it
	waitFor(t, "IPv4 VIP drained and withdrawn", func() bool { return s.vip("192.0.2.10/32").State == StateWithdrawn })
	if st := s.vip("2001:db8::10/128"); st.State != StateAnnounced || st.OnWire != nil || st.WouldSend == nil || st.DryRun != "would announce" {
		t.Fatalf("the IPv6 VIP does not need api_upstreams: %+v", st)
	}
	// The state changes first, the (would-be) wire right after it.
	waitFor(t, "the withdrawn IPv4 VIP's would-be path gone", func() bool { return s.vip("192.0.2.10/32").WouldSend == nil })
	if st := s.vip("192.0.2.10/32"); st.OnWire != nil || st.DryRun != "would not announce" {
		t.Fatalf("the withdrawn IPv4 VIP in a dry run: %+v", st)
	}

	srv := httptest.NewServer(mux(StatusPath, a.Handler()))
	defer srv.Close()
	var out bytes.Buffer
	if err := Command([]string{"status", "-addr", srv.URL}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"site 1", "dry run no_bgp", "192.0.2.10/32", "withdrawn", "api_upstreams (1/4 healthy, need 50%)",
		"2001:db8::10/128", "announced", "would send (dry run, not sent): next hop 2001:db8::1", "announced (dry run: would announce)", "prefixes announced 0 (dry run: would announce 1)", "64512:1:1", "snapshot_fresh", "age (global)", "up"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("rampart anycast status:\n%s", out.String())
	out.Reset()
	if err := Command([]string{"status", "-json", "-addr", strings.TrimPrefix(srv.URL, "http://")}, &out); err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.VIPs) != 2 || len(st.Inputs) != 3 || st.DryRun != DryRunNoBGP {
		t.Fatalf("json status: %v %+v", err, st)
	}
	if got, err := FetchStatus(context.Background(), srv.URL); err != nil || got.Site != 1 {
		t.Fatalf("FetchStatus: %v %+v", err, got)
	}
	resp, err := http.Post(srv.URL+StatusPath, "text/plain", nil)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %v %v", err, resp)
	}
	resp.Body.Close()
	if err := Command([]string{"status"}, &out); err == nil {
		t.Fatal("status without -addr succeeded")
	}
	if err := Command([]string{"status", "-addr", "127.0.0.1:1"}, &out); err == nil {
		t.Fatal("status from nowhere succeeded")
	}
	if s.metric(t, "rampart_anycast_dry_run_transitions_total", "192.0.2.10/32", "withdraw") != 1 {
		t.Fatal("withdraw transition not counted")
	}
	if s.metric(t, "rampart_anycast_transitions_total", "2001:db8::10/128", "announce") != 0 ||
		s.metric(t, "rampart_anycast_prefixes_announced", "", "") != 0 || s.metric(t, "rampart_anycast_dry_run", "", "") != 1 {
		t.Fatal("a dry run counted as announced")
	}
}

func mux(path string, h http.Handler) http.Handler {
	m := http.NewServeMux()
	m.Handle(path, h)
	return m
}

// TestHTTPProbeInput: an http input GETs a URL each sample; the VIP
// follows it.
func TestHTTPProbeInput(t *testing.T) {
	var status atomic.Int64
	status.Store(200)
	var hosts atomic.Value
	probe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts.Store(r.Host)
		w.WriteHeader(int(status.Load()))
	}))
	defer probe.Close()
	c := unitConfig(1)
	c.DryRun, c.SampleIntervalMs, c.Drain.TimeMs = DryRunNoBGP, 50, 1000
	c.Inputs = []Input{{Name: "regional", Kind: KindHTTP, Global: true, URL: probe.URL + "/healthz", Host: "api.example",
		Rise: 2, Fall: 2}}
	c.Normalize()
	a, err := New(c, Options{Fleet: func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 2, State: SiteUp}} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(context.Background())
	s := &site{Announcer: a}
	waitFor(t, "announced on a passing probe", func() bool { return s.vip("192.0.2.10/32").State == StateAnnounced })
	if hosts.Load() != "api.example" {
		t.Fatalf("probe Host %v", hosts.Load())
	}
	status.Store(503)
	waitFor(t, "draining on a failing probe", func() bool { return s.vip("192.0.2.10/32").State == StateDraining })
	if in := a.Status().Inputs[0]; in.Up || !strings.Contains(in.Detail, "status 503") {
		t.Fatalf("input: %+v", in)
	}
}

// TestBIRDDryRunNoAnnounce: sessions come up, nothing is announced.
func TestBIRDDryRunNoAnnounce(t *testing.T) {
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{sitePeer(5)}})
	c := siteConfig(r, 5, VIP{Prefix: "192.0.2.50/32"})
	c.DryRun = DryRunNoAnnounce
	s := startSite(t, c, nil)
	birdtest.Wait(t, 15*time.Second, "session", func() bool { return established(r, "site5") })
	const v = "192.0.2.50/32"
	waitFor(t, "decided announced and counted as would-be", func() bool {
		return s.vip(v).State == StateAnnounced && s.metric(t, "rampart_anycast_dry_run_prefixes", "", "") == 1
	})
	// A real announcement reaches BIRD within milliseconds (see the
	// figures); give a broken dry run ample time to show itself.
	time.Sleep(500 * time.Millisecond)
	if rs := routes(t, r, v); len(rs) != 0 {
		t.Fatalf("dry run announced: %+v", rs)
	}
	st := s.Status()
	if len(st.Sessions) != 1 || st.Sessions[0].State != "established" || st.Sessions[0].SentUpdates != 0 {
		t.Fatalf("sessions: %+v", st.Sessions)
	}
	vs := s.vip(v)
	if st.DryRun != DryRunNoAnnounce || st.PrefixesAnnounced != 0 || st.PrefixesWouldAnnounce != 1 ||
		vs.OnWire != nil || vs.WouldSend == nil || vs.WouldSend.NextHop != "198.51.100.5" || vs.DryRun != "would announce" {
		t.Fatalf("status: %+v, vip %+v", st, vs)
	}
	for _, m := range []struct {
		name, vip, to string
		want          float64
	}{
		{"rampart_anycast_dry_run", "", "", 1},
		{"rampart_anycast_prefixes_announced", "", "", 0},
		{"rampart_anycast_dry_run_prefixes", "", "", 1},
		{"rampart_anycast_transitions_total", v, "announce", 0},
		{"rampart_anycast_dry_run_transitions_total", v, "announce", 1},
		{"rampart_anycast_sessions_up", "", "", 1},
	} {
		if got := s.metric(t, m.name, m.vip, m.to); got != m.want {
			t.Errorf("%s{vip=%q,to=%q} = %v, want %v", m.name, m.vip, m.to, got, m.want)
		}
	}
	if s.stateMetric(t, "rampart_anycast_vip_state", v, "announced") != 0 ||
		s.stateMetric(t, "rampart_anycast_dry_run_vip_state", v, "announced") != 1 {
		t.Error("vip_state counts a dry run as announced, or the dry-run state is missing")
	}
}

// TestBIRDPassword: a TCP MD5 protected session.
func TestBIRDPassword(t *testing.T) {
	r := birdtest.Start(t, birdtest.Config{Password: "s3cret-md5", Peers: []birdtest.Peer{sitePeer(6)}})
	c := siteConfig(r, 6, VIP{Prefix: "192.0.2.60/32"})
	c.Peers[0].Password = "s3cret-md5"
	startSite(t, c, nil)
	birdtest.Wait(t, 15*time.Second, "route over an MD5 session", func() bool {
		_, ok := fromSite(routes(t, r, "192.0.2.60/32"), 6)
		return ok
	})
}
