package anycast

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/anycast/birdtest"
)

// childEnv makes the test binary a lone speaker (the agent in miniature):
// the value is its Config as JSON; SIGTERM drains and stops it.
const childEnv = "RAMPART_ANYCAST_TEST_CHILD"

func TestMain(m *testing.M) {
	if js := os.Getenv(childEnv); js != "" {
		os.Exit(runChild(js))
	}
	os.Exit(m.Run())
}

func runChild(js string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var c Config
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		log.Error("child config", "err", err)
		return 2
	}
	others := func(netip.Prefix) []SiteRoute { return []SiteRoute{{Site: 1, State: SiteUp}} }
	a, err := New(c, Options{Logger: log, Fleet: others})
	if err != nil {
		log.Error("child announcer", "err", err)
		return 2
	}
	_ = a.SetUp("ready", true, "child")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Error("child run", "err", err)
		return 1
	}
	return 0
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBIRDHungSpeakerAndSIGTERM runs a speaker as a child process. SIGSTOP
// hangs it: BIRD drops the session when its hold timer (3 s) expires and
// the routes go. SIGCONT: it peers again. SIGTERM: it drains (seen at
// BIRD), then closes the session with an administrative shutdown.
func TestBIRDHungSpeakerAndSIGTERM(t *testing.T) {
	const v4, v6 = "192.0.2.30/32", "2001:db8::30/128"
	r := birdtest.Start(t, birdtest.Config{Peers: []birdtest.Peer{sitePeer(4)}})
	c := siteConfig(r, 4, VIP{Prefix: v4}, VIP{Prefix: v6})
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("child log:\n%s", out.String())
		}
	})
	present := func() bool {
		_, a := fromSite(routes(t, r, v4), 4)
		_, b := fromSite(routes(t, r, v6), 4)
		return a && b
	}
	figure(t, "child start to both VIPs at BIRD", birdtest.Wait(t, 15*time.Second, "child's routes", present))

	// Hang it.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	figure(t, "SIGSTOP to session dropped by BIRD (hold time 3 s)",
		birdtest.Wait(t, 15*time.Second, "BIRD drops the hung speaker", func() bool { return !established(r, "site4") }))
	if p, _ := r.Protocol("site4"); !strings.Contains(p.LastError, "Hold timer expired") {
		t.Fatalf("BIRD dropped the session for another reason: %+v", p)
	}
	if len(routes(t, r, v4))+len(routes(t, r, v6)) != 0 {
		t.Fatal("routes of a dropped session still at BIRD")
	}

	// Wake it: it peers again and its routes return.
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	figure(t, "SIGCONT to routes back at BIRD", birdtest.Wait(t, 20*time.Second, "routes after SIGCONT", present))

	// SIGTERM: drain, then an administrative shutdown.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	figure(t, "SIGTERM to drained paths at BIRD", birdtest.Wait(t, 10*time.Second, "drained on SIGTERM", func() bool {
		a, ok4 := fromSite(routes(t, r, v4), 4)
		b, ok6 := fromSite(routes(t, r, v6), 4)
		return ok4 && ok6 && drainedRoute(a, 4, 2) && drainedRoute(b, 4, 2)
	}))
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("child exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child still running 30 s after SIGTERM")
	}
	p, err := r.Protocol("site4")
	if err != nil || p.LastError != "Received: Administrative shutdown" || p.Message != "site 4 going down for maintenance" {
		t.Fatalf("BIRD after SIGTERM: %+v %v", p, err)
	}
	if n := len(routes(t, r, v4)) + len(routes(t, r, v6)); n != 0 {
		t.Fatalf("%d routes left", n)
	}
	t.Logf("BIRD: %s — %q", p.LastError, p.Message)
}
