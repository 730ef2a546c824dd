package bpf

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"testing"

	"github.com/rampart-edge/rampart/bpf/netnstest"
)

// needRoot skips outside CI when not root, naming what is missing; as root
// (always, in CI) the capability probe must pass, and any later BPF error
// is a real failure.
func needRoot(t testing.TB) {
	t.Helper()
	netnstest.NeedRoot(t, "CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN (bpffs mount, network namespaces)")
	if err := Probe(); err != nil {
		t.Fatalf("capability probe: %v", err)
	}
}

// openTest opens a Filter with the driven clock on a private bpffs.
func openTest(t testing.TB, o Options) *Filter {
	t.Helper()
	needRoot(t)
	o.testClock = true
	root := netnstest.PinRoot(t)
	f, err := Open(root, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Remove(); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	return f
}

func (f *Filter) setClock(t testing.TB, ns uint64) {
	t.Helper()
	if err := f.objs.RtClock.Put(uint32(0), ns); err != nil {
		t.Fatalf("set clock: %v", err)
	}
}

// setConns sets a source's connection count as sockops keeps it: in
// rt_conns and in its bucket's sum in rt_connsum.
func (f *Filter) setConns(t testing.TB, a netip.Addr, n uint32) {
	t.Helper()
	k := srcKey(a)
	var old, sum uint32
	if err := f.objs.RtConns.Lookup(k, &old); err != nil && !isNotExist(err) {
		t.Fatal(err)
	}
	b := uint32(mixKey(k) >> (64 - bits.TrailingZeros32(f.objs.RtConnsum.MaxEntries())))
	if err := f.objs.RtConnsum.Lookup(b, &sum); err != nil {
		t.Fatal(err)
	}
	if err := f.objs.RtConnsum.Put(b, sum+n-old); err != nil {
		t.Fatal(err)
	}
	var err error
	if n == 0 {
		err = f.objs.RtConns.Delete(k)
	} else {
		err = f.objs.RtConns.Put(k, n)
	}
	if err != nil && !isNotExist(err) {
		t.Fatalf("set conns: %v", err)
	}
}

// pkt describes a test frame; bytes builds it (checksums are not filled:
// XDP does not check them).
type pkt struct {
	vlans        []uint16 // TPIDs, outermost first
	src, dst     string
	proto        uint8 // 6, 17, or e.g. 1 (ICMP)
	sport, dport uint16
	flags        uint8 // TCP flags; default ACK
	ipOpts       int   // IPv4 option bytes (multiple of 4)
	frag         bool  // IPv4 MF / IPv6 fragment header
	ext          []uint8
	payload      int
	truncate     int // bytes cut off the end
}

const (
	fSYN = 0x02
	fACK = 0x10
	fFIN = 0x01
	fRST = 0x04
)

func (p pkt) bytes() []byte {
	src, dst := netip.MustParseAddr(p.src), netip.MustParseAddr(p.dst)
	var l4 []byte
	switch p.proto {
	case 6:
		l4 = make([]byte, 20+p.payload)
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		l4[12] = 5 << 4
		l4[13] = p.flags
		if p.flags == 0 {
			l4[13] = fACK
		}
	case 17:
		l4 = make([]byte, 8+p.payload)
		binary.BigEndian.PutUint16(l4[0:], p.sport)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
	default:
		l4 = make([]byte, 8+p.payload)
	}
	b := make([]byte, 12, 128)
	copy(b, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	for _, tpid := range p.vlans {
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, 100)
	}
	if src.Is4() {
		b = binary.BigEndian.AppendUint16(b, 0x0800)
		hl := 20 + p.ipOpts
		ip := make([]byte, hl)
		ip[0] = 0x40 | byte(hl/4)
		binary.BigEndian.PutUint16(ip[2:], uint16(hl+len(l4)))
		if p.frag {
			ip[6] = 0x20 // MF
		}
		ip[8], ip[9] = 64, p.proto
		s4, d4 := src.As4(), dst.As4()
		copy(ip[12:], s4[:])
		copy(ip[16:], d4[:])
		b = append(append(b, ip...), l4...)
	} else {
		b = binary.BigEndian.AppendUint16(b, 0x86dd)
		var ext []byte
		nh := p.proto
		hdrs := p.ext
		if p.frag {
			hdrs = append(hdrs, 44)
		}
		for i := len(hdrs) - 1; i >= 0; i-- {
			ext = append([]byte{nh, 0, 0, 0, 0, 0, 0, 0}, ext...)
			nh = hdrs[i]
		}
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ext)+len(l4)))
		ip[6], ip[7] = nh, 64
		s16, d16 := src.As16(), dst.As16()
		copy(ip[8:], s16[:])
		copy(ip[24:], d16[:])
		b = append(append(append(b, ip...), ext...), l4...)
	}
	return b[:len(b)-p.truncate]
}
