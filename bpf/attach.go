package bpf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// XDPMode selects how the XDP program is attached.
type XDPMode int

const (
	XDPAuto    XDPMode = iota // driver (native) mode, else generic
	XDPDriver                 // native only
	XDPGeneric                // generic (skb) only: works everywhere, much slower
)

func (m XDPMode) String() string {
	return [...]string{"auto", "driver", "generic"}[m]
}

// Pin names under links/: xdp-driver-<ifname>, xdp-generic-<ifname>,
// sklookup-<netns inode>, sockops-<cgroup inode>.
const (
	pinXDPDriver  = "xdp-driver-"
	pinXDPGeneric = "xdp-generic-"
	pinSkLookup   = "sklookup-"
	pinSockops    = "sockops-"
)

func (f *Filter) progFor(pin string) *ebpf.Program {
	switch {
	case strings.HasPrefix(pin, "xdp-"):
		return f.objs.RampartXdp
	case strings.HasPrefix(pin, pinSkLookup):
		return f.objs.RampartSkLookup
	case strings.HasPrefix(pin, pinSockops):
		return f.objs.RampartSockops
	}
	return nil
}

// takeOver points every pinned link at the programs just loaded. A link whose
// target is gone (interface or namespace deleted) is unpinned.
func (f *Filter) takeOver() error {
	dir := filepath.Join(f.root, "links")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("bpf: read %s: %w", dir, err)
	}
	for _, e := range ents {
		prog := f.progFor(e.Name())
		if prog == nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		l, err := link.LoadPinnedLink(path, nil)
		if err != nil {
			return fmt.Errorf("bpf: load pinned link %s: %w", path, err)
		}
		if err := l.Update(prog); err != nil {
			if errors.Is(err, unix.ENOLINK) {
				_ = l.Unpin()
				l.Close()
				continue
			}
			l.Close()
			return fmt.Errorf("bpf: take over link %s: %w", path, err)
		}
		f.links[e.Name()] = l
	}
	return nil
}

func (f *Filter) pin(name string, l link.Link) error {
	if err := l.Pin(filepath.Join(f.root, "links", name)); err != nil {
		l.Close()
		return fmt.Errorf("bpf: pin link %s: %w", name, err)
	}
	f.links[name] = l
	return nil
}

// AttachXDP attaches the filter to the interface ifname of the calling
// thread's network namespace, or keeps the attachment taken over from the
// pins. It returns the mode in effect: with XDPAuto, XDPGeneric means the
// driver has no native XDP, which the caller should report loudly.
func (f *Filter) AttachXDP(ifname string, mode XDPMode) (XDPMode, error) {
	iface, err := net.InterfaceByName(ifname)
	if err != nil {
		return 0, fmt.Errorf("bpf: attach XDP: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range []string{pinXDPDriver, pinXDPGeneric} {
		l, ok := f.links[p+ifname]
		if !ok {
			continue
		}
		info, err := l.Info()
		if err == nil && info.XDP() != nil && int(info.XDP().Ifindex) == iface.Index {
			got := XDPDriver
			if p == pinXDPGeneric {
				got = XDPGeneric
			}
			if mode != XDPAuto && mode != got {
				return got, fmt.Errorf("bpf: %s already has XDP in %v mode; detach it first", ifname, got)
			}
			return got, nil
		}
		_ = l.Unpin() // stale: the interface was re-created
		l.Close()
		delete(f.links, p+ifname)
	}
	try := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: f.objs.RampartXdp, Interface: iface.Index, Flags: flags})
	}
	var l link.Link
	got := mode
	switch mode {
	case XDPDriver:
		l, err = try(link.XDPDriverMode)
	case XDPGeneric:
		l, err = try(link.XDPGenericMode)
	default:
		got = XDPDriver
		if l, err = try(link.XDPDriverMode); err != nil {
			var gerr error
			got = XDPGeneric
			if l, gerr = try(link.XDPGenericMode); gerr != nil {
				err = fmt.Errorf("driver mode: %w; generic mode: %w", err, gerr)
			} else {
				err = nil
			}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("bpf: attach XDP to %s (%v mode): %w", ifname, mode, err)
	}
	name := pinXDPDriver + ifname
	if got == XDPGeneric {
		name = pinXDPGeneric + ifname
	}
	return got, f.pin(name, l)
}

// DetachXDP removes the filter from ifname.
func (f *Filter) DetachXDP(ifname string) error {
	return f.detach(pinXDPDriver+ifname, pinXDPGeneric+ifname)
}

func (f *Filter) detach(names ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range names {
		if l, ok := f.links[n]; ok {
			delete(f.links, n)
			return errors.Join(l.Unpin(), l.Close())
		}
	}
	return fmt.Errorf("bpf: %s: not attached", strings.Join(names, " / "))
}

func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// AttachSkLookup attaches socket steering to the network namespace at
// netnsPath (e.g. /proc/self/ns/net, /run/netns/NAME).
func (f *Filter) AttachSkLookup(netnsPath string) error {
	ino, err := inode(netnsPath)
	if err != nil {
		return fmt.Errorf("bpf: attach sk_lookup: %w", err)
	}
	name := pinSkLookup + strconv.FormatUint(ino, 10)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[name]; ok {
		return nil
	}
	ns, err := os.Open(netnsPath)
	if err != nil {
		return fmt.Errorf("bpf: attach sk_lookup: %w", err)
	}
	defer ns.Close()
	l, err := link.AttachNetNs(int(ns.Fd()), f.objs.RampartSkLookup)
	if err != nil {
		return fmt.Errorf("bpf: attach sk_lookup to %s: %w", netnsPath, err)
	}
	return f.pin(name, l)
}

// DetachSkLookup removes socket steering from the namespace at netnsPath.
func (f *Filter) DetachSkLookup(netnsPath string) error {
	ino, err := inode(netnsPath)
	if err != nil {
		return fmt.Errorf("bpf: detach sk_lookup: %w", err)
	}
	return f.detach(pinSkLookup + strconv.FormatUint(ino, 10))
}

// AttachConnTracker attaches the connection counter (sockops) to a cgroup v2
// directory; "" means the root of the cgroup2 mount, i.e. every process. The
// proxy's sockets must be inside it for MaxConns to see its connections.
func (f *Filter) AttachConnTracker(cgroupPath string) error {
	cgroupPath, name, err := connTrackerPin(cgroupPath)
	if err != nil {
		return fmt.Errorf("bpf: attach connection tracker: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[name]; ok {
		return nil
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: cgroupPath, Attach: ebpf.AttachCGroupSockOps, Program: f.objs.RampartSockops})
	if err != nil {
		return fmt.Errorf("bpf: attach connection tracker to %s: %w", cgroupPath, err)
	}
	return f.pin(name, l)
}

// DetachConnTracker removes the connection counter from cgroupPath.
func (f *Filter) DetachConnTracker(cgroupPath string) error {
	_, name, err := connTrackerPin(cgroupPath)
	if err != nil {
		return fmt.Errorf("bpf: detach connection tracker: %w", err)
	}
	return f.detach(name)
}

// connTrackerPin resolves cgroupPath ("" is the root of the cgroup2 mount)
// and names the pin of the connection tracker's link to it.
func connTrackerPin(cgroupPath string) (path, pin string, err error) {
	if cgroupPath == "" {
		if cgroupPath, err = cgroup2Root(); err != nil {
			return "", "", err
		}
	}
	ino, err := inode(cgroupPath)
	if err != nil {
		return "", "", fmt.Errorf("cgroup %s: %w", cgroupPath, err)
	}
	return cgroupPath, pinSockops + strconv.FormatUint(ino, 10), nil
}

func cgroup2Root() (string, error) {
	fh, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "", fmt.Errorf("find cgroup2 mount: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 2 && fs[2] == "cgroup2" {
			return fs[1], nil
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// Attachments lists the pinned links in effect, e.g. "xdp-driver-eth0",
// "sklookup-4026531840", "sockops-1".
func (f *Filter) Attachments() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for n := range f.links {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func nativeUint64(b [8]byte) uint64 { return binary.NativeEndian.Uint64(b[:]) }

func isNotExist(err error) bool { return errors.Is(err, ebpf.ErrKeyNotExist) }
