package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process the lab started, in a namespace, by PID; Start (the
// kernel's start time) tells it apart from a later process that got the
// same PID.
type Proc struct {
	Name   string   `json:"name"` // e.g. proxy/eu1
	Netns  string   `json:"netns"`
	Args   []string `json:"args"` // the command run inside the namespace
	Env    []string `json:"env,omitempty"`
	Log    string   `json:"log"`
	Cgroup string   `json:"cgroup,omitempty"` // started inside this cgroup v2 directory
	PID    int      `json:"pid"`
	Start  uint64   `json:"start"`
	// Stopped says a drill stopped it on purpose (StartProxy restarts it).
	Stopped bool `json:"stopped,omitempty"`
}

// spawn starts p with `nsenter --net=NETNS -- ARGS`, detached (own session,
// output appended to p.Log), inside p.Cgroup when set, and records its PID.
// The process outlives the caller; while the caller runs it reaps it.
func spawn(p *Proc) error {
	out, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%s: open its log: %w", p.Name, err)
	}
	defer out.Close()
	fmt.Fprintf(out, "--- %s: %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(p.Args, " "))
	cmd := exec.Command("nsenter", append([]string{"--net=" + p.Netns, "--"}, p.Args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if p.Cgroup != "" {
		cg, err := os.Open(p.Cgroup)
		if err != nil {
			return fmt.Errorf("%s: open cgroup %s: %w", p.Name, p.Cgroup, err)
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start %s: %w", p.Name, strings.Join(p.Args, " "), err)
	}
	p.PID, p.Stopped = cmd.Process.Pid, false
	p.Start, _ = startTime(p.PID)
	go func() { _ = cmd.Wait() }()
	return nil
}

// procStat reads /proc/PID/stat: the start time and whether the process
// is a zombie.
func procStat(pid int) (start uint64, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	start, zombie, err = parseStat(string(b))
	if err != nil {
		return 0, false, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return start, zombie, nil
}

// parseStat parses a /proc/PID/stat line: field 3 (state) and field 22
// (start time in clock ticks). comm (field 2) may hold spaces and
// parentheses: the fields after it start after the last ')'.
func parseStat(s string) (start uint64, zombie bool, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("no ')' in %.100q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("start time %q: %w", f[19], err)
	}
	return start, f[0] == "Z", nil
}

func startTime(pid int) (uint64, error) {
	s, _, err := procStat(pid)
	return s, err
}

// Alive says whether the recorded process still runs (same PID and start
// time, not a zombie).
func (p *Proc) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	start, zombie, err := procStat(p.PID)
	return err == nil && !zombie && (p.Start == 0 || start == p.Start)
}

// stop sends SIGTERM, waits up to grace for the process to end, then
// SIGKILLs it and waits again. A process already gone is no error.
func (p *Proc) stop(grace time.Duration) error {
	if !p.Alive() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: SIGTERM pid %d: %w", p.Name, p.PID, err)
	}
	if waitGone(p, grace) {
		return nil
	}
	return p.kill()
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) kill() error {
	if !p.Alive() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: SIGKILL pid %d: %w", p.Name, p.PID, err)
	}
	if waitGone(p, 30*time.Second) {
		return nil
	}
	return fmt.Errorf("%s: pid %d still there 30s after SIGKILL", p.Name, p.PID)
}

func waitGone(p *Proc, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !p.Alive() {
			return true
		}
	}
	return !p.Alive()
}

// tail returns the last n bytes of a log file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, 0)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return string(b[:k])
}
