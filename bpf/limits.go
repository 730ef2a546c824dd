package bpf

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"
)

const (
	nsPerSec = 1_000_000_000
	maxRate  = 1_000_000_000 // bound for rates and bursts: burst*1e9 fits in 63 bits

	flagMalformedVIPPass   = 1
	flagMalformedOtherDrop = 2
)

// Limits are the per-source limits for traffic to VIP:port. A zero rate means
// no limit; a zero burst with a non-zero rate means burst = rate.
type Limits struct {
	PPS, PPSBurst     uint64 // packets per second per source (IPv4 /32, IPv6 /64)
	SYNRate, SYNBurst uint64 // new TCP connections (SYN without ACK) per second per source
	MaxConns          uint32 // established TCP connections per source; SYNs at the cap are dropped

	// NewSources bounds how fast sources without state get some (global, all
	// CPUs): under a spoofed-source flood new sources would otherwise evict
	// known ones from the per-source table and each get a full burst. Beyond
	// it, packets from sources without state are dropped (DropNewSource).
	NewSources, NewSourceBurst uint64

	MalformedVIPPass   bool // pass malformed frames to VIP addresses (default: drop)
	MalformedOtherDrop bool // drop malformed frames not known to be for a VIP (default: pass)
}

func bucket(name string, rate, burst uint64) (r, b, fill uint64, err error) {
	if rate == 0 {
		return 0, 0, 0, nil
	}
	if burst == 0 {
		burst = rate
	}
	if rate > maxRate || burst > maxRate {
		return 0, 0, 0, fmt.Errorf("bpf: %s rate %d / burst %d: each must be at most %d", name, rate, burst, maxRate)
	}
	b = burst * nsPerSec
	return rate, b, (b + rate - 1) / rate, nil
}

// SetLimits installs l. Every source's buckets (and the new-source bucket)
// restart full under the new limits: the config generation stored in each
// bucket no longer matches. The config is written to the inactive slot, then
// the slot index is flipped, so a packet never sees half of a change. rt_cfg
// holds both slots in its one entry: the live slot is rewritten with the
// bytes it holds, which a packet reading it meanwhile cannot tell apart.
func (f *Filter) SetLimits(l Limits) error {
	var c rampartCfg
	var err error
	if c.PpsRate, c.PpsBurst, c.PpsFill, err = bucket("pps", l.PPS, l.PPSBurst); err != nil {
		return err
	}
	if c.SynRate, c.SynBurst, c.SynFill, err = bucket("syn", l.SYNRate, l.SYNBurst); err != nil {
		return err
	}
	if c.NewRate, c.NewBurst, c.NewFill, err = bucket("new source", l.NewSources, l.NewSourceBurst); err != nil {
		return err
	}
	c.MaxConns = l.MaxConns
	if l.MalformedVIPPass {
		c.Flags |= flagMalformedVIPPass
	}
	if l.MalformedOtherDrop {
		c.Flags |= flagMalformedOtherDrop
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c.Gen = f.cfgs.Slot[f.ctl.CfgIdx&1].Gen + 1
	f.waitFlip()
	ctl := f.ctl
	ctl.CfgIdx = (f.ctl.CfgIdx + 1) & 1
	cfgs := f.cfgs
	cfgs.Slot[ctl.CfgIdx] = c
	if err := f.objs.RtCfg.Update(uint32(0), &cfgs, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: write limits: %w", err)
	}
	if err := f.objs.RtCtl.Update(uint32(0), &ctl, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: switch limits: %w", err)
	}
	f.ctl, f.cfgs, f.limits, f.flipped = ctl, cfgs, limitsFromCfg(&c), time.Now()
	return nil
}

// Limits returns the limits in force (read back from the maps after Open).
func (f *Filter) Limits() Limits {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.limits
}

func limitsFromCfg(c *rampartCfg) Limits {
	return Limits{
		PPS: c.PpsRate, PPSBurst: c.PpsBurst / nsPerSec,
		SYNRate: c.SynRate, SYNBurst: c.SynBurst / nsPerSec,
		MaxConns:   c.MaxConns,
		NewSources: c.NewRate, NewSourceBurst: c.NewBurst / nsPerSec,
		MalformedVIPPass:   c.Flags&flagMalformedVIPPass != 0,
		MalformedOtherDrop: c.Flags&flagMalformedOtherDrop != 0,
	}
}
