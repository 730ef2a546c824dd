// Package pgtest starts a throwaway PostgreSQL server for tests: the
// Debian package's initdb and postgres, a cluster in a temp dir on a free
// loopback port, run as a non-root user (PostgreSQL refuses root), fsync
// off. One cluster is shared by a test binary; each DSN call gets a fresh
// database. Without the server binaries a test is skipped naming what is
// missing, or fails when the CI environment variable is set.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

type cluster struct {
	dir   string
	port  int
	cmd   *exec.Cmd
	admin string
	next  int
	mu    sync.Mutex
}

var shared struct {
	once sync.Once
	c    *cluster
	err  error
	skip string
}

// DSN returns the connection string of a new, empty database on the
// shared throwaway cluster, starting the cluster on first use.
func DSN(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.c, shared.skip, shared.err = start() })
	if shared.skip != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL is required in CI (hack/deps.sh test installs the Debian package postgresql): %s", shared.skip)
		}
		t.Skipf("PostgreSQL not available (install the Debian package postgresql): %s", shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("start PostgreSQL: %v", shared.err)
	}
	c := shared.c
	c.mu.Lock()
	c.next++
	name := fmt.Sprintf("t%d", c.next)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.admin)
	if err != nil {
		t.Fatalf("connect to the test cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// Main runs the tests, then stops the shared cluster and removes it.
func Main(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.stop()
	}
	os.Exit(code)
}

// binaries finds initdb and postgres: on PATH, or the newest Debian
// /usr/lib/postgresql/<version>/bin.
func binaries() (initdb, postgres string, err error) {
	if i, err := exec.LookPath("initdb"); err == nil {
		if p, err := exec.LookPath("postgres"); err == nil {
			return i, p, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if isExec(i) && isExec(p) {
			return i, p, nil
		}
	}
	return "", "", fmt.Errorf("initdb and postgres are neither on PATH nor in /usr/lib/postgresql/*/bin")
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// runAs returns the credential to run the server with: the postgres user
// (created as a system user when missing) when we are root, else nil.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		out, aerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres").CombinedOutput()
		if aerr != nil {
			return nil, fmt.Errorf("no postgres user and useradd failed: %v: %s", aerr, out)
		}
		if u, err = user.Lookup("postgres"); err != nil {
			return nil, err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func start() (c *cluster, skip string, err error) {
	initdb, postgres, err := binaries()
	if err != nil {
		return nil, err.Error(), nil
	}
	cred, err := runAs()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "rampart-pg-")
	if err != nil {
		return nil, "", err
	}
	c = &cluster{dir: dir}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, "", err
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	var logs bytes.Buffer
	c.cmd = exec.Command(postgres, "-D", data, "-p", strconv.Itoa(c.port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300")
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	c.cmd.Stdout, c.cmd.Stderr = &logs, &logs
	if err := c.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("start postgres: %w", err)
	}
	c.admin = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.admin)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return c, "", nil
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, "", fmt.Errorf("postgres did not accept connections within 30s: %v; log: %s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop shuts the server down (fast mode) and removes the cluster.
func (c *cluster) stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(c.dir)
}
