package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// startPostgres starts a PostgreSQL server for the control plane
// (LAB_STORE=postgres) inside the control namespace, the way control/pgtest
// does for tests: the Debian package's initdb and postgres, a cluster in a
// temp dir (recorded in the state), run as the postgres user (PostgreSQL refuses root),
// fsync off. It returns the DSN.
func (l *Lab) startPostgres(dir string) (string, error) {
	initdb, postgres, err := pgBinaries()
	if err != nil {
		return "", err
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", fmt.Errorf("LAB_STORE=postgres needs the postgres user (Debian package postgresql): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The data dir is a temp dir of its own: the postgres user must reach
	// it, and the state dir's parents may not let it (e.g. under /root).
	tmp, err := os.MkdirTemp("", "rampart-lab-pg-")
	if err != nil {
		return "", fmt.Errorf("postgres data dir: %w", err)
	}
	l.TempDirs = append(l.TempDirs, tmp)
	if err := l.save(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("chmod %s: %w", tmp, err)
	}
	data := filepath.Join(tmp, "data")
	l.Control.PGDir = data
	if err := os.Mkdir(data, 0o700); err != nil {
		return "", fmt.Errorf("postgres data dir: %w", err)
	}
	if err := os.Chown(data, uid, gid); err != nil {
		return "", fmt.Errorf("chown %s: %w", data, err)
	}
	init := exec.Command("setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups", initdb, "-D", data, "-U", "rampart", "--auth=trust", "-E", "UTF8", "--no-sync")
	if out, err := init.CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %w: %s", err, out)
	}
	p := &Proc{Name: "postgres", Netns: l.Control.Netns, Log: filepath.Join(dir, "postgres.log"),
		Args: []string{"setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups", postgres, "-D", data, "-k", data,
			"-c", "listen_addresses=127.0.0.1", "-c", "port=5432", "-c", "fsync=off", "-c", "full_page_writes=off"}}
	if err := l.startProc(p); err != nil {
		return "", err
	}
	// PostgreSQL's own start is a few seconds; the control plane retries
	// its connection, but a clear error beats a retry loop: wait for the port.
	hc := dialer{netns: l.Control.Netns, timeout: time.Second}
	err = waitFor(context.Background(), 60*time.Second, "PostgreSQL on 127.0.0.1:5432 in the control namespace", func() error {
		if !p.Alive() {
			return errors.New("postgres exited: " + tail(p.Log, 2000))
		}
		c, err := hc.DialContext(context.Background(), "tcp", "127.0.0.1:5432")
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		return "", err
	}
	return "postgres://rampart@127.0.0.1:5432/postgres?sslmode=disable", nil
}

// pgBinaries finds initdb and postgres of the newest installed PostgreSQL.
func pgBinaries() (initdb, postgres string, err error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if _, e1 := os.Stat(i); e1 == nil {
			if _, e2 := os.Stat(p); e2 == nil {
				return i, p, nil
			}
		}
	}
	return "", "", errors.New("LAB_STORE=postgres: no /usr/lib/postgresql/*/bin/initdb (Debian package postgresql; hack/deps.sh test installs it)")
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}
