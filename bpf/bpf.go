// Package bpf loads rampart's L4 programs (rampart.c) and manages their maps:
// the XDP filter (VIP match, deny list, per-source token buckets, connection
// cap), sk_lookup steering of VIP:port to the proxy's sockets, and the sockops
// program that counts established connections per source. Maps and links are
// pinned, so a restarted agent takes them over without a gap. See README.md.
package bpf

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// DefaultPinRoot is where maps (maps/) and links (links/) are pinned.
const DefaultPinRoot = "/sys/fs/bpf/rampart"

// Options size the maps. A pinned map is reused only if its size matches;
// changing a size needs Remove first (and so a gap in protection).
type Options struct {
	MaxSources     uint32 // per-source state, IPv4 /32 and IPv6 /64, rounded up to a power of 2; default 1<<20
	MaxConnSources uint32 // sources with established connections; default 1<<18
	MaxSockets     uint32 // steering socket slots (RegisterSocket indexes); default 64
	MaxVIPs        uint32 // VIP:port:proto entries per family, plus one per address; default 4096

	testClock bool // tests: the programs read time from rt_clock
}

// Filter is the loaded programs and their maps. Methods are safe for
// concurrent use.
type Filter struct {
	mu      sync.Mutex
	dmu     sync.Mutex // the deny tries (deny4, deny6, rt_denyh); taken before mu
	root    string
	objs    rampartObjects
	spec    *ebpf.CollectionSpec
	ctl     rampartCtl
	cfgs    rampartCfgs // both limits slots as in rt_cfg; cfgs.Slot[ctl.CfgIdx&1] is live
	limits  Limits
	flipped time.Time            // last switch of the active limits slot
	links   map[string]link.Link // by pin name
	deny4   *trie[e4]            // nil until this process installs or adopts a list
	deny6   *trie[e6]
}

// Open loads the programs, reusing maps pinned under pinRoot (DefaultPinRoot
// when empty) and creating and pinning the missing ones, then points every
// link pinned under pinRoot/links at the new programs (link.Update), so
// traffic is filtered throughout an agent restart. opts may be nil.
func Open(pinRoot string, opts *Options) (*Filter, error) {
	if pinRoot == "" {
		pinRoot = DefaultPinRoot
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := Probe(); err != nil {
		return nil, err
	}
	if err := checkBPFFS(pinRoot); err != nil {
		return nil, err
	}
	for _, d := range []string{"maps", "links"} {
		if err := os.MkdirAll(filepath.Join(pinRoot, d), 0o700); err != nil {
			return nil, fmt.Errorf("bpf: create pin directory: %w", err)
		}
	}
	spec, err := loadRampart()
	if err != nil {
		return nil, fmt.Errorf("bpf: %w", err)
	}
	size := func(name string, v, def uint32) {
		if v == 0 {
			v = def
		}
		spec.Maps[name].MaxEntries = v
	}
	sets := max(nextPow2(o.MaxSources), 2*ways) / ways
	if o.MaxSources == 0 {
		sets = 1 << 18
	}
	spec.Maps[rampartMapRtSrcs].MaxEntries = sets
	size(rampartMapRtConns, o.MaxConnSources, 1<<18)
	connSums := max(nextPow2(spec.Maps[rampartMapRtConns].MaxEntries), 1024)
	spec.Maps[rampartMapRtConnsum].MaxEntries = connSums
	size(rampartMapRtSocks, o.MaxSockets, 64)
	size(rampartMapRtVip4, o.MaxVIPs, 4096)
	size(rampartMapRtVip6, o.MaxVIPs, 4096)
	var res unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &res); err != nil {
		return nil, fmt.Errorf("bpf: tick length: %w", err)
	}
	for name, v := range map[string]any{
		rampartVarRtTestClock:    boolByte(o.testClock),
		rampartVarRtJiffyNs:      uint64(res.Nano()),
		rampartVarRtSrcShift:     uint32(64 - bits.TrailingZeros32(sets)),
		rampartVarRtConnsumShift: uint32(64 - bits.TrailingZeros32(connSums)),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("bpf: set %s: %w", name, err)
		}
	}
	// flipped: a previous agent may have switched a double buffer just now.
	_, err = os.Stat(filepath.Join(pinRoot, "maps", rampartMapRtConnsum))
	freshSums := errors.Is(err, os.ErrNotExist)
	f := &Filter{root: pinRoot, spec: spec, links: map[string]link.Link{}, flipped: time.Now()}
	mapOpts := ebpf.MapOptions{PinPath: filepath.Join(pinRoot, "maps")}
	shared, err := dataMaps(spec, mapOpts)
	if err != nil {
		return nil, err
	}
	err = spec.LoadAndAssign(&f.objs, &ebpf.CollectionOptions{Maps: mapOpts, MapReplacements: shared})
	for _, m := range shared {
		m.Close() // LoadAndAssign holds its own handles
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("bpf: load programs (verifier): %+v", ve)
		}
		return nil, fmt.Errorf("bpf: load programs and maps under %s (a size or layout change needs Remove): %w", pinRoot, err)
	}
	if err := f.init(); err != nil {
		f.objs.Close()
		return nil, err
	}
	if freshSums {
		if err := f.fillConnSums(); err != nil {
			f.objs.Close()
			return nil, err
		}
	}
	if err := f.takeOver(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.markSrcsLayout(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// srcsLayout numbers rt_srcs' entry layout (struct src_entry in rampart.c);
// 0 is the layout before the entry held xpass.
const srcsLayout = 1

// markSrcsLayout: a pinned rt_ctl naming another layout means the entries
// were written by another program version. Once the links run this one
// (takeOver), the deny generation is bumped, so no entry's cached verdicts
// are read with this layout before a fresh trie lookup.
func (f *Filter) markSrcsLayout() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctl.SrcsLayout == srcsLayout {
		return nil
	}
	ctl := f.ctl
	ctl.DenyGen++
	ctl.SrcsLayout = srcsLayout
	if err := f.objs.RtCtl.Update(uint32(0), &ctl, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: mark rt_srcs layout %d: %w", srcsLayout, err)
	}
	f.ctl = ctl
	return nil
}

// dataMaps loads the pinned rt_ctl and rt_cfg (creating and pinning them
// when missing) for use both under their names and as the data sections
// .data.ctl and .data.cfg, which the XDP program reads as globals (a direct
// load, no map lookup). The agent keeps writing them as maps.
func dataMaps(spec *ebpf.CollectionSpec, opts ebpf.MapOptions) (map[string]*ebpf.Map, error) {
	out := map[string]*ebpf.Map{}
	for name, section := range map[string]string{rampartMapRtCtl: ".data.ctl", rampartMapRtCfg: ".data.cfg"} {
		m, err := ebpf.NewMapWithOptions(spec.Maps[name], opts)
		if err != nil {
			for _, m := range out {
				m.Close()
			}
			return nil, fmt.Errorf("bpf: load or create %s under %s (a size or layout change needs Remove): %w", name, opts.PinPath, err)
		}
		out[name], out[section] = m, m
	}
	return out, nil
}

// init reads the agent-owned state back from the maps, or writes defaults
// into fresh ones.
func (f *Filter) init() error {
	if err := f.objs.RtCtl.Lookup(uint32(0), &f.ctl); err != nil {
		return fmt.Errorf("bpf: read rt_ctl: %w", err)
	}
	if err := f.objs.RtCfg.Lookup(uint32(0), &f.cfgs); err != nil {
		return fmt.Errorf("bpf: read rt_cfg: %w", err)
	}
	live := &f.cfgs.Slot[f.ctl.CfgIdx&1]
	f.limits = limitsFromCfg(live)
	if live.Gen == 0 { // fresh maps
		if err := f.SetLimits(Limits{}); err != nil {
			return err
		}
	}
	for _, m := range []*ebpf.Map{f.objs.RtDeny4, f.objs.RtDeny6} {
		var id uint32
		err := m.Lookup(uint32(0), &id)
		if err == nil && id != 0 {
			continue
		}
		inner, err := ebpf.NewMap(f.innerSpec(m))
		if err != nil {
			return fmt.Errorf("bpf: create empty deny trie: %w", err)
		}
		err = m.Put(uint32(0), inner)
		inner.Close()
		if err != nil {
			return fmt.Errorf("bpf: install empty deny trie: %w", err)
		}
	}
	return nil
}

func (f *Filter) innerSpec(outer *ebpf.Map) *ebpf.MapSpec {
	if outer == f.objs.RtDeny6 {
		return f.spec.Maps[rampartMapRtDeny6].InnerMap.Copy()
	}
	return f.spec.Maps[rampartMapRtDeny4].InnerMap.Copy()
}

// Close releases this process's handles. Pinned maps and links stay: the
// programs keep running until Remove (or Detach*).
func (f *Filter) Close() error {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, l := range f.links {
		errs = append(errs, l.Close())
	}
	f.links = map[string]link.Link{}
	if f.deny4 != nil {
		errs = append(errs, f.deny4.m.Close())
		f.deny4 = nil
	}
	if f.deny6 != nil {
		errs = append(errs, f.deny6.m.Close())
		f.deny6 = nil
	}
	errs = append(errs, f.objs.Close())
	return errors.Join(errs...)
}

// Remove detaches every pinned link, removes all pins under the pin root and
// closes f: protection stops.
func (f *Filter) Remove() error {
	f.mu.Lock()
	var errs []error
	for name, l := range f.links {
		errs = append(errs, l.Unpin(), l.Close())
		delete(f.links, name)
	}
	f.mu.Unlock()
	errs = append(errs, f.Close(), os.RemoveAll(f.root))
	return errors.Join(errs...)
}

const ways = 4 // WAYS in rampart.c

func nextPow2(v uint32) uint32 {
	p := uint32(1)
	for p < v && p < 1<<31 {
		p <<= 1
	}
	return p
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// waitFlip keeps a double-buffered half from being rewritten while a program
// may still read it: the half written now was live until the previous flip,
// and a program run lasts microseconds. Call with f.mu held.
func (f *Filter) waitFlip() {
	if d := time.Millisecond - time.Since(f.flipped); d > 0 {
		time.Sleep(d)
	}
}

// checkBPFFS fails unless root (or its nearest existing parent) is on bpffs.
func checkBPFFS(root string) error {
	dir := root
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			if st.Type != unix.BPF_FS_MAGIC {
				return fmt.Errorf("bpf: bpffs not mounted at %s (mount -t bpf bpf %s)", dir, dir)
			}
			return nil
		}
		if !errors.Is(err, unix.ENOENT) || filepath.Dir(dir) == dir {
			return fmt.Errorf("bpf: stat pin root %s: %w", dir, err)
		}
		dir = filepath.Dir(dir)
	}
}
