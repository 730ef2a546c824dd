package bpf

import (
	"errors"
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/cilium/ebpf"
)

// Reason is a verdict (or event) counted in the per-CPU rt_counters array;
// the order matches enum reason in rampart.c.
type Reason uint32

const (
	PassNotVIP    Reason = iota // not for a VIP:port (management, other protocols, ARP...): untouched
	Pass                        // VIP traffic within the limits
	DropDeny                    // source in the deny list
	DropPPS                     // over the per-source packet rate
	DropSYN                     // over the per-source new-connection rate
	DropConnCap                 // SYN from a source at its connection cap
	DropNewSource               // no state for the source and the global new-source rate is spent
	PassMalformed               // malformed or truncated, passed by policy
	DropMalformed               // malformed or truncated, dropped by policy
	PassNoState                 // could not store the source's state: passed (fail open)
	Steered                     // sk_lookup: assigned to a registered socket
	SteerNoSocket               // sk_lookup: VIP without a (usable) registered socket
	ConnTrackFull               // sockops: rt_conns full, a connection went uncounted
	NumReasons
)

var reasonNames = [NumReasons]string{"pass_not_vip", "pass", "drop_deny", "drop_pps", "drop_syn",
	"drop_conn_cap", "drop_new_source", "pass_malformed", "drop_malformed", "pass_no_state",
	"steered", "steer_no_socket", "conntrack_full"}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint32(r))
}

// Counters are packet (or event) counts by Reason, summed over CPUs, since
// the maps were created (they survive agent restarts).
type Counters [NumReasons]uint64

// ReadCounters sums the per-CPU counters.
func (f *Filter) ReadCounters() (Counters, error) {
	var c Counters
	var per []uint64
	for r := range NumReasons {
		if err := f.objs.RtCounters.Lookup(uint32(r), &per); err != nil {
			return c, fmt.Errorf("bpf: read counter %v: %w", r, err)
		}
		for _, v := range per {
			c[r] += v
		}
	}
	return c, nil
}

// srcKey is the per-source key: IPv4 /32 as ff 00 00 00 a b c d, IPv6 the
// first 8 bytes (/64). No valid IPv6 source starts with ff (multicast).
func srcKey(a netip.Addr) uint64 {
	var b [8]byte
	if a = a.Unmap(); a.Is4() {
		b[0] = 0xff
		a4 := a.As4()
		copy(b[4:], a4[:])
	} else {
		a16 := a.As16()
		copy(b[:], a16[:8])
	}
	return nativeUint64(b)
}

// ConnCount is the number of established TCP connections to VIPs from a's
// source key (its /32 or /64), as counted by the sockops program.
func (f *Filter) ConnCount(a netip.Addr) (uint32, error) {
	var n uint32
	err := f.objs.RtConns.Lookup(srcKey(a), &n)
	if err != nil && !isNotExist(err) {
		return 0, fmt.Errorf("bpf: read connection count of %v: %w", a, err)
	}
	return n, nil
}

// Stats are map fill levels for metrics.
type Stats struct {
	Sources, MaxSources         int // per-source state entries
	ConnSources, MaxConnSources int // sources with established connections
	Deny4, Deny6                int // prefixes in the live deny list
}

// Stats counts entries (it reads the whole per-source table: O(MaxSources)).
func (f *Filter) Stats() (Stats, error) {
	f.mu.Lock()
	s := Stats{Deny4: int(f.ctl.Deny4N), Deny6: int(f.ctl.Deny6N)}
	f.mu.Unlock()
	sets := f.objs.RtSrcs.MaxEntries()
	s.MaxSources, s.MaxConnSources = int(sets)*ways, int(f.objs.RtConns.MaxEntries())
	var cursor ebpf.MapBatchCursor
	keys, vals := make([]uint32, 4096), make([]rampartSrcSet, 4096)
	for {
		n, err := f.objs.RtSrcs.BatchLookup(&cursor, keys, vals, nil)
		for _, set := range vals[:n] {
			for _, e := range set.E {
				if e.Key != 0 {
					s.Sources++
				}
			}
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return s, fmt.Errorf("bpf: read per-source table: %w", err)
		}
	}
	var k uint64
	it := f.objs.RtConns.Iterate()
	for it.Next(&k, new(uint32)) {
		s.ConnSources++
	}
	if err := it.Err(); err != nil {
		return s, fmt.Errorf("bpf: count connection sources: %w", err)
	}
	return s, nil
}

// fillConnSums sums rt_conns into a freshly created rt_connsum (pins of an
// older version, whose connections are counted but not summed). A
// connection opened or closed while this runs may be missed in its sum: an
// under-count there lets a source of that bucket skip the cap check until
// its bucket's connections close (only on such an upgrade).
func (f *Filter) fillConnSums() error {
	shift := 64 - bits.TrailingZeros32(f.objs.RtConnsum.MaxEntries())
	sums := map[uint32]uint32{}
	var k uint64
	var n uint32
	it := f.objs.RtConns.Iterate()
	for it.Next(&k, &n) {
		sums[uint32(mixKey(k)>>shift)] += n
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("bpf: read rt_conns: %w", err)
	}
	for i, v := range sums {
		if err := f.objs.RtConnsum.Update(i, v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("bpf: write rt_connsum[%d]: %w", i, err)
		}
	}
	return nil
}

// mixKey is mix() in rampart.c.
func mixKey(x uint64) uint64 { return (x ^ x>>32) * 0x9E3779B97F4A7C15 }
