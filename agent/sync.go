package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/rampart-edge/rampart/bpf"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// target receives the snapshots the watcher verified (snapdir.Target).
type target struct{ a *Agent }

func (t target) Apply(s *snapshot.Snapshot) error {
	a := t.a
	maxVIPs := int(a.c.Maps.MaxVIPs)
	if maxVIPs == 0 {
		maxVIPs = 4096
	}
	l, err := translate(s.Config, a.c.limitsExtra(), maxVIPs)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.active = &activeSnap{snap: s, l4: l}
	a.fastSocks = time.Now().Add(3 * time.Second) // the proxy may open new listeners now
	a.mu.Unlock()
	a.log.Info("agent: snapshot active", "version", s.Version.String(), "vips", len(l.Addrs), "ports", len(l.Ports))
	a.wake()
	select {
	case a.sockKick <- struct{}{}:
	default:
	}
	return nil
}

func (t target) SetSourceVersions(desired, downloaded snapshot.Version) {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	if desired != (snapshot.Version{}) {
		t.a.source.desired = desired
	}
	if downloaded != (snapshot.Version{}) {
		t.a.source.downloaded = downloaded
	}
}

func (t target) RejectSnapshot(reason string) { t.a.m.snapRejected.WithLabelValues(reason).Inc() }

// syncState is what the syncer last put in the kernel.
type syncState struct {
	version   snapshot.Version
	createdAt time.Time
	haveVIPs  bool
	vips      []bpf.VIP
	addrs     []netip.Addr
	haveLim   bool
	limits    bpf.Limits
	haveDeny  bool
	deny      []netip.Prefix // the syncer edits it in place: elsewhere read only its length
	denyV4    int            // how many of deny are IPv4
	denySeq   uint64
	denyAt    time.Time
	denyFrom  denyInputs // what deny was computed from
	denyLast  denyApply
	okAt      time.Time // last pass that left everything in line
	err       string
	passes    uint64
}

func (a *Agent) syncLoop(ctx context.Context) {
	t := time.NewTicker(a.c.Poll)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kick:
		}
		full := time.Since(last) >= time.Second-a.c.Poll/2 // every 4th tick at 250 ms
		if full {
			last = time.Now()
		}
		a.syncOnce(full)
	}
}

// syncOnce brings the kernel in line with the active snapshot, the proxy's
// sockets and the deny channel. full adds the once-a-second work: XDP
// attachments checked.
func (a *Agent) syncOnce(full bool) {
	f := a.filter()
	if f == nil {
		return
	}
	if full {
		a.attachAll()
	}
	a.mu.Lock()
	act, st := a.active, a.st
	a.mu.Unlock()
	if act == nil {
		a.setReady()
		return // no snapshot: leave the kernel as the last agent left it
	}
	var errs []error
	fail := func(stage string, err error) {
		a.m.syncErrors.WithLabelValues(stage).Inc()
		errs = append(errs, fmt.Errorf("%s: %w", stage, err))
	}

	// VIPs: an address is local only while its ports are filtered, so new
	// ports go into the maps before the address, and a removed address
	// leaves the interface before its ports leave the maps.
	want := bpfVIPs(act.l4.Ports, a.socks.index)
	if !st.haveVIPs || !slices.Equal(want, st.vips) || !slices.Equal(act.l4.Addrs, st.addrs) {
		step := want
		for _, v := range st.vips {
			if !slices.Contains(act.l4.Addrs, v.Addr) {
				step = append(slices.Clip(step), v)
			}
		}
		err := f.SetVIPs(step)
		if err != nil {
			fail("vips", err)
		} else if err = a.vips.Sync(act.l4.Addrs); err != nil {
			fail("addresses", err)
		} else if len(step) != len(want) {
			if err = f.SetVIPs(want); err != nil {
				fail("vips", err)
			}
		}
		if err == nil {
			st.haveVIPs, st.vips, st.addrs = true, want, act.l4.Addrs
		}
	}
	cur := st.limits
	if !st.haveLim {
		cur = f.Limits()
	}
	if cur != act.l4.Limits {
		if err := f.SetLimits(act.l4.Limits); err != nil {
			fail("limits", err)
		} else {
			cur = act.l4.Limits
		}
	}
	st.haveLim, st.limits = cur == act.l4.Limits, cur

	if err := a.syncDeny(f, act, &st); err != nil {
		fail("deny", err)
	}

	st.passes++
	if len(errs) == 0 {
		if st.version != act.snap.Version {
			a.log.Info("agent: maps in line with snapshot", "version", act.snap.Version.String(),
				"vips", len(st.addrs), "entries", len(st.vips), "deny", len(st.deny))
		}
		st.version, st.createdAt, st.okAt, st.err = act.snap.Version, act.snap.CreatedAt, time.Now(), ""
		a.m.syncEpoch.Set(float64(st.version.Epoch))
		a.m.syncSeq.Set(float64(st.version.Sequence))
	} else {
		e := errors.Join(errs...).Error()
		if e != st.err {
			a.log.Error("agent: sync failed; retrying every poll", "err", e)
		}
		st.err = e
	}
	a.m.vips.Set(float64(len(st.addrs)))
	a.m.denySeq.Set(float64(st.denySeq))
	a.mu.Lock()
	a.st = st
	a.mu.Unlock()
	a.setReady()
	if a.ac != nil {
		a.ac.update(act)
	}
}

// attachAll attaches (or confirms) XDP on every configured interface; an
// interface re-created since is attached again. Generic mode is logged at
// WARN once per interface.
func (a *Agent) attachAll() {
	f := a.filter()
	if f == nil {
		return
	}
	for _, name := range a.c.Interfaces {
		mode, err := f.AttachXDP(name, a.c.XDPMode)
		a.mu.Lock()
		s := a.ifaces[name]
		if err != nil {
			if s.err != err.Error() {
				a.log.Error("agent: XDP not attached; retrying every second", "interface", name, "err", err)
				a.m.syncErrors.WithLabelValues("xdp").Inc()
			}
			s.attached, s.err = false, err.Error()
		} else {
			if !s.attached {
				a.log.Info("agent: XDP attached", "interface", name, "mode", mode.String())
			}
			if mode == bpf.XDPGeneric && !s.warned {
				s.warned = true
				a.log.Warn("agent: XDP runs in GENERIC mode: the driver has no native XDP; filtering works but costs "+
					"several times more CPU per packet and happens after the kernel allocated the packet", "interface", name)
			}
			if s.attached && s.mode != mode {
				a.m.xdpMode.DeleteLabelValues(name, s.mode.String())
			}
			s.attached, s.mode, s.err = true, mode, ""
			a.m.xdpMode.WithLabelValues(name, mode.String()).Set(1)
		}
		a.mu.Unlock()
	}
}

// steered reports whether the active snapshot steers to k.
func (a *Agent) steered(k sockKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == nil {
		return false
	}
	return slices.ContainsFunc(a.active.l4.Ports, func(p port) bool { return p.Sock == k })
}

func (a *Agent) socketLoop(ctx context.Context) {
	t := time.NewTicker(a.c.Poll)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.sockKick:
			last = time.Time{}
		}
		a.mu.Lock()
		fast := time.Now().Before(a.fastSocks)
		a.mu.Unlock()
		if _, _, reached, _ := a.socks.snapshot(); !reached {
			fast = true // the proxy is (re)starting: steer to it as soon as it is up
		}
		if fast || time.Since(last) >= time.Second {
			last = time.Now()
			a.fetchSockets(ctx)
		}
	}
}

// fetchSockets gets the proxy's sockets and, when they changed, re-syncs
// the VIP entries that point at them.
func (a *Agent) fetchSockets(ctx context.Context) {
	before, _, _, prevErr := a.socks.snapshot()
	changed, err := a.socks.fetch(ctx)
	if err != nil {
		a.m.handoffErrs.Inc()
		if err.Error() != prevErr {
			a.log.Warn("agent: proxy sockets not fetched; steering stays on the sockets registered", "err", err)
		}
		if changed {
			a.m.syncErrors.WithLabelValues("sockets").Inc()
		}
	}
	after, gen, _, _ := a.socks.snapshot()
	a.m.sockets.Set(float64(len(after)))
	if changed {
		a.log.Info("agent: proxy sockets registered", "generation", gen, "sockets", len(after), "before", len(before))
		a.wake()
	}
}
