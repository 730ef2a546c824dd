package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Down removes the lab recorded in stateDir: its processes (by PID and
// start time), bpffs mounts, cgroups, namespaces, temp dirs and then the
// directory.
// It is idempotent: what is already gone is skipped, and a directory with
// no state file is no lab (nil). After a crash of `rampart lab up` it
// removes what the state file recorded so far: each thing is recorded
// before it is made.
func Down(stateDir string) error {
	l, err := Load(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range l.Procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.stop(10 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, m := range l.Mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	for _, c := range l.Cgroups {
		if err := rmdirCgroup(c); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range l.Namespaces {
		if _, err := os.Stat(nsPath(n)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := run("ip", "netns", "del", n); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range l.TempDirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("lab down in %s: %w", stateDir, errors.Join(errs...))
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		return fmt.Errorf("remove %s: %w", l.Dir, err)
	}
	return nil
}

// rmdirCgroup removes a cgroup directory, waiting a little for exited
// processes to leave it.
func rmdirCgroup(dir string) error {
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		err = unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
	}
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return fmt.Errorf("remove cgroup %s (processes: %s): %w", dir, strings.Fields(string(procs)), err)
}
