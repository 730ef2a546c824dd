package bpf

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// CapabilityError says what this process lacks to load and attach the
// programs.
type CapabilityError struct {
	Missing []string // e.g. CAP_BPF, CAP_NET_ADMIN
	Err     error    // the probe load's error, if it failed
}

func (e *CapabilityError) Error() string {
	msg := "bpf: cannot load BPF programs"
	if len(e.Missing) > 0 {
		msg += ": missing " + strings.Join(e.Missing, ", ")
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CapabilityError) Unwrap() error { return e.Err }

var (
	probeOnce sync.Once
	probeErr  error
)

// Probe checks once per process that BPF programs can be loaded and attached:
// the effective capabilities (CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON, or
// CAP_SYS_ADMIN for the first and last) and the load of a trivial XDP program. Any BPF error after a successful
// probe is a real failure (a verifier rejection is EACCES, which looks like a
// permission problem but is not one). bpffs is checked by Open.
func Probe() error {
	probeOnce.Do(func() { probeErr = probe() })
	return probeErr
}

func probe() error {
	var missing []string
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &CapabilityError{Err: fmt.Errorf("capget: %w", err)}
	}
	has := func(c int) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if !has(unix.CAP_BPF) && !has(unix.CAP_SYS_ADMIN) {
		missing = append(missing, "CAP_BPF")
	}
	if !has(unix.CAP_NET_ADMIN) {
		missing = append(missing, "CAP_NET_ADMIN")
	}
	// Without it the verifier applies the Spectre v1 restrictions for
	// unprivileged pointer arithmetic and rejects the programs.
	if !has(unix.CAP_PERFMON) && !has(unix.CAP_SYS_ADMIN) {
		missing = append(missing, "CAP_PERFMON")
	}
	if len(missing) > 0 {
		return &CapabilityError{Missing: missing}
	}
	_ = rlimit.RemoveMemlock() // only matters before memcg accounting (5.11)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 2, asm.DWord), asm.Return()},
		License:      "MIT",
	})
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			missing = append(missing, "CAP_BPF (or unprivileged BPF disabled)")
		}
		return &CapabilityError{Missing: missing, Err: fmt.Errorf("probe program: %w", err)}
	}
	return prog.Close()
}
