package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rampart-edge/rampart/control/api"
	"github.com/rampart-edge/rampart/control/config"
	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/pgtest"
	"github.com/rampart-edge/rampart/control/server"
	"github.com/rampart-edge/rampart/control/store/pgstore"
)

// Environment of the child control instance this test binary becomes
// (see init): the database, the lease TTL, and the arm file whose
// presence makes the next revision's write transaction stop the process
// (SIGSTOP to itself) between its last statement and COMMIT.
const (
	envChildDSN = "RAMPART_TEST_CONTROL_CHILD_DSN"
	envChildTTL = "RAMPART_TEST_CONTROL_CHILD_TTL"
	envChildArm = "RAMPART_TEST_CONTROL_CHILD_ARM"
)

func init() {
	if dsn := os.Getenv(envChildDSN); dsn != "" {
		if err := runChild(dsn, os.Getenv(envChildTTL), os.Getenv(envChildArm)); err != nil {
			fmt.Fprintln(os.Stderr, "child control instance:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// runChild serves a control instance on a loopback port (printed as
// "LISTEN addr") until killed. Its store stops the process inside the
// write transaction of a revision when the arm file exists, after
// printing "STOPPING".
func runChild(dsn, ttl, arm string) error {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
signing_key: unused
tokens:
  - {name: ops, role: admin, sha256: %s}
  - {name: viewer, role: read, sha256: %s}
storage: {type: postgres, postgres: {dsn: %q, lease_ttl: %s, instance: child}}
rollout: {tick: 50ms, stages: [{name: all}]}
`, api.HashToken(adminToken), api.HashToken(readToken), dsn, ttl)))
	if err != nil {
		return err
	}
	stop := func(_ context.Context, evs []model.Event) {
		for _, e := range evs {
			if e.Kind != model.EventRevision {
				continue
			}
			if os.Remove(arm) == nil {
				// The stop reaches this thread a moment after kill returns
				// (another thread may take the signal): wait for the
				// SIGCONT, so nothing of the transaction runs before.
				cont := make(chan os.Signal, 1)
				signal.Notify(cont, syscall.SIGCONT)
				fmt.Println("STOPPING", e.Subject)
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
				<-cont
				signal.Stop(cont)
			}
			return
		}
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := server.Open(cfg, server.Options{Key: testKey, Logger: log, Postgres: func(o *pgstore.Options) { o.BeforeCommit = stop }})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println("LISTEN", ln.Addr().String())
	return s.Serve(ln, nil)
}

// procState is the state letter of /proc/<pid>/stat (T: stopped).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "?"
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return "?"
}

// The scenario with a real process and a real SIGSTOP: two
// control instances on one PostgreSQL; the leader, another process, is
// stopped inside the write transaction of a revision submit (it holds
// the sequence row lock and has written the revision). The survivor
// takes the lease over and submits while the leader stays stopped; when
// the leader resumes, its submit answers 503, never 201, and nothing of
// its epoch was written after the pause.
func TestLeaderStoppedInsideWriteTransaction(t *testing.T) {
	dsn := pgtest.DSN(t)
	const ttl = time.Second
	arm := filepath.Join(t.TempDir(), "arm")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChildDSN+"="+dsn, envChildTTL+"="+ttl.String(), envChildArm+"="+arm)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	line := func(prefix string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok || !strings.HasPrefix(l, prefix) {
				t.Fatalf("child: got %q, want %s…", l, prefix)
			}
			return strings.TrimPrefix(l, prefix)
		case <-time.After(60 * time.Second):
			t.Fatalf("child: no %s line within 60s", prefix)
		}
		return ""
	}
	child := &instance{url: "http://" + line("LISTEN ")}
	var ld struct {
		Leader bool
		Epoch  uint64
	}
	eventually(t, 30*time.Second, "the child instance to lead", func() bool {
		r := child.call(t, readToken, "GET", "/v1/leader", "", nil, nil, &ld)
		return r.StatusCode == 200 && ld.Leader
	})
	before := child.submit(t, cfgYAML(2, 100))
	survivor := start(t, backend{name: "postgres", dsn: dsn}.config(t, tuning{bake: fast.bake, activeTimeout: fast.activeTimeout, leaseTTL: ttl}), "")

	// The paused submit: a larger config, so the transaction does some work.
	if err := os.WriteFile(arm, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", child.url+"/v1/revisions?message=paused", strings.NewReader(cfgYAML(300, 100)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{code: resp.StatusCode, body: string(b)}
	}()
	line("STOPPING ")
	eventually(t, 30*time.Second, "the child to be stopped", func() bool { return procState(cmd.Process.Pid) == "T" })
	stopped := time.Now()

	survivor.waitLeader(t, 30*ttl)
	took := time.Since(stopped)
	after := survivor.submit(t, cfgYAML(3, 100))
	wrote := time.Since(stopped)
	if procState(cmd.Process.Pid) != "T" {
		t.Fatal("the child ran again before the survivor wrote")
	}
	select {
	case a := <-answered:
		t.Fatalf("the stopped leader answered: %+v", a)
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(60 * time.Second):
		t.Fatal("the resumed leader did not answer the paused submit within 60s")
	}
	t.Logf("FIGURE leader process stopped (SIGSTOP) inside a submit's write transaction, lease TTL %s: survivor leads %s after the stop, its submit done %s after; the resumed leader answered %d after %s: %.200s",
		ttl, took.Round(time.Millisecond), wrote.Round(time.Millisecond), a.code, time.Since(stopped).Round(time.Millisecond), a.body)
	if a.err != nil || a.code != http.StatusServiceUnavailable {
		t.Fatalf("the resumed leader's submit: %d %v %s, want 503", a.code, a.err, a.body)
	}
	if after.Version.Epoch != before.Version.Epoch+1 || !before.Version.Less(after.Version) {
		t.Fatalf("versions: before the stop %s, survivor's %s", before.Version, after.Version)
	}

	// In the database: the paused revision is nowhere, the old epoch wrote
	// exactly the one revision before the stop, and no outbox row of the
	// old epoch is newer than the new epoch's first.
	var paused, oldRevs, lateOld int
	if err := withPG(dsn, func(ctx context.Context, conn *pgx.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM revisions WHERE doc->>'message' = 'paused'").Scan(&paused); err != nil {
			return err
		}
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM revisions WHERE (doc->'version'->>'epoch')::bigint = $1", int64(before.Version.Epoch)).Scan(&oldRevs); err != nil {
			return err
		}
		return conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE epoch = $1 AND id > (SELECT min(id) FROM events WHERE epoch = $2)`,
			int64(before.Version.Epoch), int64(after.Version.Epoch)).Scan(&lateOld)
	}); err != nil {
		t.Fatalf("count in the database: %v", err)
	}
	if paused != 0 || oldRevs != 1 || lateOld != 0 {
		t.Fatalf("paused revisions %d (want 0), revisions of epoch %d: %d (want 1), old-epoch events after the new epoch's first: %d (want 0)",
			paused, before.Version.Epoch, oldRevs, lateOld)
	}
}
