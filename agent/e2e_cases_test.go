package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/rampart-edge/rampart/anycast"
	"github.com/rampart-edge/rampart/bpf/netnstest"
)

const (
	vip1, vip2      = "203.0.113.10", "203.0.113.11"
	allowed, denied = "192.0.2.1", "192.0.2.3"
)

func (e *e2e) counter(reason string) uint64 { return e.agent.Status().BPF.Counters[reason] }

// dialErr connects from src to addr in the client namespace.
func (e *e2e) dialErr(src, addr string, timeout time.Duration) error {
	var c net.Conn
	var err error
	netnstest.Enter(e.t, e.clientNS, func() {
		dl := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err = dl.Dial("tcp", addr)
	})
	if err == nil {
		c.Close()
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (e *e2e) cases() {
	t := e.t
	web := client(t, e.clientNS, allowed, time.Second)

	t.Run("HTTP to the VIP reaches the proxy through sk_lookup", func(t *testing.T) {
		before := e.counter("steered")
		code, body, err := get(web, "http://"+vip1+"/hello")
		if err != nil || code != 200 || !strings.HasPrefix(body, "upstream says hi") {
			t.Fatalf("GET: %d %q %v", code, body, err)
		}
		if e.counter("steered") == before || e.counter("pass") == 0 {
			t.Fatalf("not steered: %v", e.agent.Status().BPF.Counters)
		}
	})

	t.Run("HTTP/3 over UDP to the VIP reaches the h3 listener", func(t *testing.T) {
		var udp *net.UDPConn
		var err error
		netnstest.Enter(t, e.clientNS, func() { udp, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(allowed)}) })
		if err != nil {
			t.Fatal(err)
		}
		defer udp.Close()
		tr := &http3.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "vip.test"}, // a self-signed test certificate
			Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				ua, err := net.ResolveUDPAddr("udp", addr)
				if err != nil {
					return nil, err
				}
				return quic.DialEarly(ctx, udp, ua, tc, qc)
			},
		}
		defer tr.Close()
		before := e.counter("steered")
		code, body, err := get(&http.Client{Transport: tr, Timeout: 5 * time.Second}, "https://"+vip1+":8443/hello")
		if err != nil || code != 200 || !strings.HasPrefix(body, "upstream says hi") {
			t.Fatalf("HTTP/3 GET: %d %q %v", code, body, err)
		}
		if e.counter("steered") == before {
			t.Fatal("UDP not steered")
		}
	})

	t.Run("deny file applies within a second", func(t *testing.T) {
		if err := e.dialErr(denied, vip1+":80", time.Second); err != nil {
			t.Fatalf("before the deny: %v", err)
		}
		before := e.counter("drop_deny")
		t0 := e.writeDeny(1, time.Hour, denied+"/32")
		took := e.until(t, t0, func() bool { return isTimeout(e.dialErr(denied, vip1+":80", 100*time.Millisecond)) })
		t.Logf("FIGURE deny file written -> connection attempt dropped in XDP: %v", took.Round(time.Millisecond))
		if e.counter("drop_deny") <= before {
			t.Fatal("no deny drop counted")
		}
		if code, _, err := get(web, "http://"+vip1+"/hello"); err != nil || code != 200 {
			t.Fatalf("allowed source: %d %v", code, err)
		}
	})

	t.Run("deny entries expire within a second", func(t *testing.T) {
		now := time.Now()
		e.writeDeny(2, 2*time.Second, denied+"/32")
		exp := now.Add(2 * time.Second).Truncate(time.Second).Add(time.Second) // Build rounds up
		if !isTimeout(e.dialErr(denied, vip1+":80", 100*time.Millisecond)) {
			t.Fatal("not denied before the expiry")
		}
		var passed time.Time // when the first attempt that got through started
		waitFor(t, 30*time.Second, "deny entry expired", func() bool {
			passed = time.Now()
			return e.dialErr(denied, vip1+":80", 100*time.Millisecond) == nil
		})
		// Order, not speed: traffic passes again only once the 2 s TTL is over.
		if passed.Before(now.Add(2 * time.Second)) {
			t.Fatalf("traffic passed at %s, before the entry's expiry %s", passed.Format(time.RFC3339Nano), exp.Format(time.RFC3339Nano))
		}
		t.Logf("FIGURE deny entry expiry -> traffic passes again: %v (requirement: < 1 s)", time.Since(exp).Round(time.Millisecond))
	})

	t.Run("snapshot adding a VIP applies within a second", func(t *testing.T) {
		fast := client(t, e.clientNS, allowed, 100*time.Millisecond)
		t0 := e.writeSnapshot(2, vip1, vip2)
		took := e.until(t, t0, func() bool { code, _, err := get(fast, "http://"+vip2+"/hello"); return err == nil && code == 200 })
		t.Logf("FIGURE snapshot written -> new VIP answers through sk_lookup: %v", took.Round(time.Millisecond))
		if st := e.agent.Status(); !slices.Contains(st.VIPs, vip2) || st.SyncedVersion != "1.2" {
			t.Fatalf("status after the change: vips %v synced %q", st.VIPs, st.SyncedVersion)
		}
	})

	t.Run("status and metrics", func(t *testing.T) { e.checkAdmin(t) })
	t.Run("anycast follows the snapshot", func(t *testing.T) { e.checkAnycast(t) })
	t.Run("agent restart keeps filtering", func(t *testing.T) { e.restart(t) })
}

// until polls f until it holds, and returns when the first successful
// attempt started, counted from t0 (a figure); it fails after 30 s, a
// liveness bound.
func (e *e2e) until(t *testing.T, t0 time.Time, f func() bool) time.Duration {
	t.Helper()
	for {
		start := time.Now()
		if f() {
			return start.Sub(t0)
		}
		if time.Since(t0) > 30*time.Second {
			t.Fatal("not within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *e2e) checkAdmin(t *testing.T) {
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body, err := get(hc, "http://"+e.admin+p); err != nil || code != 200 {
			t.Fatalf("%s: %d %q %v", p, code, body, err)
		}
	}
	_, metrics, err := get(hc, "http://"+e.admin+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`rampart_agent_xdp_mode{interface="` + e.iface + `",mode="driver"} 1`,
		`rampart_agent_verdicts_total{reason="drop_deny"}`, `rampart_agent_verdicts_total{reason="steered"}`,
		`rampart_agent_map_capacity{map="sources"} 4096`, `rampart_agent_map_entries{map="sockets"} 3`,
		`rampart_agent_programs_loaded 3`, `rampart_agent_synced_sequence 2`, `rampart_agent_ready 1`,
		`rampart_agent_sync_age_seconds`, `rampart_agent_deny_sequence 2`, `rampart_anycast_input_up{input="xdp"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	_, body, err := get(hc, "http://"+e.admin+"/status")
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Ready || len(st.Interfaces) != 1 || st.Interfaces[0].Mode != "driver" || len(st.Handoff.Registered) != 3 ||
		len(st.Ports) != 6 || st.BPF.Programs != 3 || st.Deny.Sequence != 2 || !st.Proxy.Ready {
		t.Fatalf("status: %s", body)
	}
	for _, p := range st.Ports {
		if p.Socket == "none" {
			t.Errorf("%s not steered", p.VIP)
		}
	}
	t.Logf("/status:\n%s", body)
}

func (e *e2e) checkAnycast(t *testing.T) {
	waitFor(t, 30*time.Second, "anycast VIPs announced", func() bool {
		st, err := anycast.FetchStatus(context.Background(), e.admin)
		if err != nil || len(st.VIPs) != 2 {
			return false
		}
		for _, v := range st.VIPs {
			if v.State != anycast.StateAnnounced {
				return false
			}
		}
		return true
	})
	var out bytes.Buffer
	if err := anycast.Command([]string{"status", "-addr", e.admin}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{vip1 + "/32", vip2 + "/32", "proxy_ready", "snapshot_fresh", "upstreams"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rampart anycast status lacks %q:\n%s", want, out.String())
		}
	}
}

// restart stops the agent (VIPs kept) and starts a new one from the pins
// while a denied source keeps trying and an allowed one keeps asking.
func (e *e2e) restart(t *testing.T) {
	e.writeDeny(3, time.Hour, denied+"/32")
	waitFor(t, 30*time.Second, "deny in force", func() bool { return isTimeout(e.dialErr(denied, vip1+":80", 100*time.Millisecond)) })
	c0 := e.counter("drop_deny")
	var deniedOK, allowedOK, allowedFail atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if e.dialErr(denied, vip1+":80", 50*time.Millisecond) == nil {
				deniedOK.Add(1)
			}
		}
	}()
	go func() {
		defer wg.Done()
		c := client(t, e.clientNS, allowed, 10*time.Second) // a liveness bound: a busy box may be slow, not failing
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if code, _, err := get(c, "http://"+vip1+"/hello"); err != nil || code != 200 {
				allowedFail.Add(1)
				lastErr.Store(err)
			} else {
				allowedOK.Add(1)
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	e.stopAgent()
	if out := netnstest.Run(t, "ip", "link", "show", e.iface); !strings.Contains(out, "xdp") {
		t.Fatalf("XDP detached when the agent stopped: %s", out)
	}
	if out, _ := exec.Command("ip", "addr", "show", "rvip0").CombinedOutput(); !strings.Contains(string(out), vip1) {
		t.Fatalf("VIPs not kept: %s", out)
	}
	down := allowedOK.Load()
	// With no agent at all, the allowed source is still answered (a count,
	// awaited under a liveness deadline, not a time window).
	waitFor(t, 30*time.Second, "answers with no agent", func() bool { return allowedOK.Load()-down >= 3 })
	downOK := allowedOK.Load() - down
	e.startAgent()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("during the restart: %d answers to the allowed source (%d with no agent), %d failures; %d connections of the denied source",
		allowedOK.Load(), downOK, allowedFail.Load(), deniedOK.Load())
	if deniedOK.Load() != 0 || allowedFail.Load() != 0 || downOK == 0 {
		t.Fatalf("denied got through %d times; allowed failed %d times (last: %v), %d answers with no agent",
			deniedOK.Load(), allowedFail.Load(), lastErr.Load(), downOK)
	}
	if c1 := e.counter("drop_deny"); c1 <= c0 {
		t.Fatalf("deny drops did not carry on: %d -> %d", c0, c1)
	}
	if st := e.agent.Status(); !slices.Contains(st.BPF.Links, "xdp-driver-"+e.iface) || st.SyncedVersion != "1.2" {
		t.Fatalf("after takeover: links %v synced %q", st.BPF.Links, st.SyncedVersion)
	}
}
