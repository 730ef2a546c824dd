package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

func TestParseStat(t *testing.T) {
	line := "4242 (rampart (x) y) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 123456 1000 10 18446744073709551615"
	start, zombie, err := parseStat(line)
	if err != nil || start != 123456 || zombie {
		t.Fatalf("parseStat = %d, %v, %v; want 123456, false, nil", start, zombie, err)
	}
	z := strings.Replace(line, ") S ", ") Z ", 1)
	if _, zombie, _ := parseStat(z); !zombie {
		t.Fatal("state Z not read as a zombie")
	}
	for _, bad := range []string{"", "1 (x S 1", "1 (x) S 1 2", strings.Replace(line, "123456", "x", 1)} {
		if _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) took it", bad)
		}
	}
	// This process's own line parses and gives a start time.
	self, _, err := procStat(os.Getpid())
	if err != nil || self == 0 {
		t.Fatalf("procStat(self) = %d, %v", self, err)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 5 1000 10")
	f.Add("7 (a) b) c) Z 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 99 1 1")
	f.Fuzz(func(t *testing.T, s string) {
		start, _, err := parseStat(s)
		if err != nil && start != 0 {
			t.Fatalf("error %v with start %d", err, start)
		}
	})
}

func TestProcAliveAndStop(t *testing.T) {
	netnstest.NeedRoot(t, "nsenter")
	p := &Proc{Name: "sleep", Netns: "/proc/self/ns/net", Args: []string{"sleep", "300"}, Log: t.TempDir() + "/sleep.log"}
	if err := spawn(p); err != nil {
		t.Fatal(err)
	}
	if !p.Alive() {
		t.Fatal("a started process is not alive")
	}
	other := *p
	other.Start++ // another process that got the same PID
	if other.Alive() {
		t.Fatal("a process with another start time counts as alive")
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Alive() {
		t.Fatal("alive after stop")
	}
	if err := p.stop(time.Second); err != nil {
		t.Fatalf("a second stop: %v", err)
	}
}

func TestTrafficResult(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := TrafficResult{Results: []Result{
		{Start: at(0), Site: "a", Attempts: 1},
		{Start: at(10), Site: "b", Attempts: 2, Failures: []time.Time{at(12)}, FirstErr: "reset"},
		{Start: at(20), Attempts: 3, Failures: []time.Time{at(22), at(40), at(90)}, Err: "refused", FirstErr: "refused"},
		{Start: at(100), Site: "a", Attempts: 1},
	}}
	if tr.Requests() != 4 || tr.Lost() != 1 || tr.FailedAttempts() != 4 || tr.Retried() != 2 {
		t.Fatalf("requests %d lost %d failed attempts %d retried %d; want 4 1 4 2", tr.Requests(), tr.Lost(), tr.FailedAttempts(), tr.Retried())
	}
	if w := tr.ErrorWindow(); w != 78*time.Millisecond {
		t.Fatalf("error window %v, want 78ms", w)
	}
	if got := fmtCounts(tr.BySite(at(5), time.Time{})); got != "a=1 b=1" {
		t.Fatalf("BySite from 5ms: %s", got)
	}
	if got := fmtCounts(tr.BySite(time.Time{}, at(100))); got != "a=1 b=1" {
		t.Fatalf("BySite to 100ms: %s", got)
	}
	if tr.FirstError() != "refused" {
		t.Fatalf("FirstError %q", tr.FirstError())
	}
	if (TrafficResult{}).ErrorWindow() != 0 || (TrafficResult{}).FirstError() != "" {
		t.Fatal("an empty result has an error window or an error")
	}
}

func TestReportAndRegistry(t *testing.T) {
	var live bytes.Buffer
	name := "unit-test-drill"
	Register(name, func(ctx context.Context, l *Lab, r *Report) error {
		r.Step("did %d things", 3)
		r.Figure("window", 1500*time.Millisecond)
		r.Figure("lost", 0)
		return errors.New("it broke")
	})
	defer func() {
		drills.Lock()
		delete(drills.m, name)
		drills.Unlock()
	}()
	r, err := RunDrill(context.Background(), &Lab{}, name, &live)
	if err == nil || err.Error() != "it broke" {
		t.Fatalf("RunDrill error %v", err)
	}
	if len(r.Steps) != 1 || r.Steps[0].Text != "did 3 things" || r.Value("lost") != 0 || r.Value("window") != 1500*time.Millisecond || r.Value("none") != nil {
		t.Fatalf("report %+v", r)
	}
	var all bytes.Buffer
	r.Print(&all)
	for _, want := range []string{"did 3 things", "FIGURE window: 1.5s", "FIGURE lost: 0", "FAILED: it broke"} {
		if !strings.Contains(all.String(), want) || !strings.Contains(live.String(), want) {
			t.Errorf("report lacks %q:\n%s\nlive:\n%s", want, all.String(), live.String())
		}
	}
	if _, err := RunDrill(context.Background(), &Lab{}, "no-such-drill", nil); err == nil || !strings.Contains(err.Error(), "failover") {
		t.Fatalf("an unknown drill: %v (want the list of drills)", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second Register of one name did not panic")
		}
	}()
	Register(name, nil)
}

func TestURLAndVIPFor(t *testing.T) {
	l := &Lab{VIPs: []string{"192.0.2.10", "2001:db8::10"}}
	if got := URL(l.VIPFor("fd00:c::10"), "whoami"); got != "http://[2001:db8::10]/whoami" {
		t.Fatal(got)
	}
	if got := URL(l.VIPFor("203.0.113.10"), "/whoami"); got != "http://192.0.2.10/whoami" {
		t.Fatal(got)
	}
	if hostPrefix("192.0.2.10") != "192.0.2.10/32" || hostPrefix("2001:db8::10") != "2001:db8::10/128" || hostPrefix("192.0.2.0/24") != "192.0.2.0/24" {
		t.Fatal("hostPrefix")
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(t.TempDir())
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of an empty dir: %v", err)
	}
	if err := Down(t.TempDir()); err != nil {
		t.Fatalf("Down of a dir without a lab: %v", err)
	}
}
