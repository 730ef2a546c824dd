package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
)

// Proto is an IP protocol number.
type Proto uint8

const (
	TCP Proto = 6
	UDP Proto = 17
)

// NoSocket as VIP.Socket filters a VIP:port without steering it.
const NoSocket = ^uint32(0)

// VIP is a service address, port and protocol. Traffic to it is filtered by
// XDP, and sk_lookup steers it to the socket registered at index Socket.
type VIP struct {
	Addr   netip.Addr
	Port   uint16
	Proto  Proto
	Socket uint32
}

func htons(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

func vip4Key(a netip.Addr, port uint16, proto Proto) rampartVip4Key {
	b := a.As4()
	return rampartVip4Key{Addr: binary.NativeEndian.Uint32(b[:]), Port: htons(port), Proto: uint8(proto)}
}

func vip6Key(a netip.Addr, port uint16, proto Proto) rampartVip6Key {
	b := a.As16()
	k := rampartVip6Key{Port: htons(port), Proto: uint8(proto)}
	for i := range k.Addr {
		k.Addr[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return k
}

// SetVIPs replaces the VIP set. XDP reads its own double-buffered VIP
// tables, sk_lookup and the connection tracker the rt_vip4/rt_vip6 hashes
// (which also back overflowing table buckets). In three steps, so that a
// VIP is never steered without being filtered and a VIP kept is never absent:
// new entries enter the hashes unsteered (NoSocket) and removed ones lose
// their socket; the inactive table half is written and made live; then the
// hashes get their final values and removed entries are deleted.
// Each address also gets a port-0 marker, which lets XDP apply the
// malformed-VIP policy to fragments and truncated frames.
func (f *Filter) SetVIPs(vips []VIP) error {
	want4 := map[rampartVip4Key]uint32{}
	want6 := map[rampartVip6Key]uint32{}
	for _, v := range vips {
		if !v.Addr.IsValid() || v.Port == 0 || (v.Proto != TCP && v.Proto != UDP) {
			return fmt.Errorf("bpf: invalid VIP %v port %d proto %d", v.Addr, v.Port, v.Proto)
		}
		a := v.Addr.Unmap()
		if a.Is4() {
			want4[vip4Key(a, v.Port, v.Proto)] = v.Socket
			want4[vip4Key(a, 0, 0)] = NoSocket
		} else {
			want6[vip6Key(a, v.Port, v.Proto)] = v.Socket
			want6[vip6Key(a, 0, 0)] = NoSocket
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	stale4, err := stage(f.objs.RtVip4, want4)
	if err != nil {
		return fmt.Errorf("bpf: stage IPv4 VIPs: %w", err)
	}
	stale6, err := stage(f.objs.RtVip6, want6)
	if err != nil {
		return fmt.Errorf("bpf: stage IPv6 VIPs: %w", err)
	}
	f.waitFlip()
	ctl := f.ctl
	ctl.VipIdx = (ctl.VipIdx + 1) & 1
	if err := f.writeTables(ctl.VipIdx, want4, want6); err != nil {
		return err
	}
	if err := f.objs.RtCtl.Update(uint32(0), &ctl, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: switch VIP tables: %w", err)
	}
	f.ctl, f.flipped = ctl, time.Now()
	if err := finish(f.objs.RtVip4, want4, stale4); err != nil {
		return fmt.Errorf("bpf: set IPv4 VIPs: %w", err)
	}
	if err := finish(f.objs.RtVip6, want6, stale6); err != nil {
		return fmt.Errorf("bpf: set IPv6 VIPs: %w", err)
	}
	return nil
}

// stage puts new keys with NoSocket and unsteers keys not wanted (returned).
func stage[K comparable](m *ebpf.Map, want map[K]uint32) ([]K, error) {
	have := map[K]bool{}
	var stale []K
	var k K
	var v uint32
	it := m.Iterate()
	for it.Next(&k, &v) {
		have[k] = true
		if _, ok := want[k]; !ok {
			stale = append(stale, k)
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	for _, k := range stale {
		if err := m.Update(k, NoSocket, ebpf.UpdateAny); err != nil {
			return nil, fmt.Errorf("unsteer %+v: %w", k, err)
		}
	}
	for k := range want {
		if !have[k] {
			if err := m.Update(k, NoSocket, ebpf.UpdateAny); err != nil {
				return nil, fmt.Errorf("add %+v: %w", k, err)
			}
		}
	}
	return stale, nil
}

func finish[K comparable](m *ebpf.Map, want map[K]uint32, stale []K) error {
	for k, v := range want {
		if err := m.Update(k, v, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("write %+v: %w", k, err)
		}
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete %+v: %w", k, err)
		}
	}
	return nil
}

const vipBits = 10 // VIP_BITS in rampart.c
const vipBuckets = 1 << vipBits

// mix is mix() in rampart.c; an index of b bits is mix(x) >> (64 - b).
func mix(x uint64) uint64 { return (x ^ x>>32) * 0x9E3779B97F4A7C15 }

// writeTables writes XDP's VIP table half (port-0 markers are left out).
func (f *Filter) writeTables(half uint32, want4 map[rampartVip4Key]uint32, want6 map[rampartVip6Key]uint32) error {
	t4 := make([]rampartVipt4, vipBuckets)
	t6 := make([]rampartVipt6, vipBuckets)
	for k := range want4 {
		if k.Port == 0 {
			continue
		}
		slot := uint64(k.Addr) | uint64(k.Port)<<32 | uint64(k.Proto)<<48 | 1<<56
		b := &t4[mix(slot)>>(64-vipBits)]
		if i := slices.Index(b.Slot[:], 0); i >= 0 {
			b.Slot[i] = slot
		} else {
			b.Overflow = 1
		}
	}
	for k := range want6 {
		if k.Port == 0 {
			continue
		}
		pp := uint32(k.Port) | uint32(k.Proto)<<16 | 1<<24
		x := uint64(k.Addr[0]^k.Addr[1]^k.Addr[2]^k.Addr[3]) | uint64(pp)<<32
		b := &t6[mix(x)>>(64-vipBits)]
		i := 0
		for i < len(b.Slot) && b.Slot[i].Pp != 0 {
			i++
		}
		if i < len(b.Slot) {
			b.Slot[i].Addr, b.Slot[i].Pp = k.Addr, pp
		} else {
			b.Overflow = 1
		}
	}
	keys := make([]uint32, vipBuckets)
	for i := range keys {
		keys[i] = half*vipBuckets + uint32(i)
	}
	if _, err := f.objs.RtVipt4.BatchUpdate(keys, t4, nil); err != nil {
		return fmt.Errorf("bpf: write IPv4 VIP table: %w", err)
	}
	if _, err := f.objs.RtVipt6.BatchUpdate(keys, t6, nil); err != nil {
		return fmt.Errorf("bpf: write IPv6 VIP table: %w", err)
	}
	return nil
}

// RegisterSocket puts a listening TCP socket or an unconnected, bound UDP
// socket (e.g. *net.TCPListener, *net.UDPConn) at index for steering. A
// socket that is closed leaves the map by itself.
func (f *Filter) RegisterSocket(index uint32, c syscall.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("bpf: register socket %d: %w", index, err)
	}
	var uerr error
	if err := rc.Control(func(fd uintptr) { uerr = f.RegisterSocketFD(index, int(fd)) }); err != nil {
		return fmt.Errorf("bpf: register socket %d: %w", index, err)
	}
	return uerr
}

// RegisterSocketFD is RegisterSocket for a raw descriptor (e.g. one received
// from the proxy over a unix socket).
func (f *Filter) RegisterSocketFD(index uint32, fd int) error {
	if err := f.objs.RtSocks.Update(index, uint64(fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: register socket fd %d at %d: %w", fd, index, err)
	}
	return nil
}

// UnregisterSocket empties slot index; its VIPs fall back to the kernel's
// usual socket lookup.
func (f *Filter) UnregisterSocket(index uint32) error {
	if err := f.objs.RtSocks.Delete(index); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: unregister socket %d: %w", index, err)
	}
	return nil
}
