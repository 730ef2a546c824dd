package pktgen

import (
	"context"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// BenchmarkSendVeth measures what the generator pushes into a veth whose
// peer drops everything in XDP (so the receiving stack costs nothing
// beyond the veth hop; veth runs the peer's receive on the sending CPU):
// 60-byte UDP frames from random sources in a /16, per batch size,
// qdisc bypass and worker count. b.N frames per run. (The peer drops ARP
// too, so the destination MAC is given.)
func BenchmarkSendVeth(b *testing.B) {
	p := newPairB(b)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1 /* XDP_DROP */), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	p.b.Do(b, func() {
		l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex(b, p.bIf)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
	})
	for _, c := range []struct {
		name    string
		batch   int
		bypass  bool
		workers int
	}{
		{"batch1", 1, false, 1},
		{"batch64", 64, false, 1},
		{"batch64-bypass", 64, true, 1},
		{"batch256-bypass", 256, true, 1},
		{"batch64-bypass-2workers", 64, true, 2},
	} {
		b.Run(c.name, func(b *testing.B) {
			rep, err := Run(context.Background(), Config{NetNS: p.a.Path, Iface: p.aIf, SrcCIDR: netip.MustParsePrefix("198.51.0.0/16"),
				Dst: netip.AddrPortFrom(p.target[0], 9), DstMAC: p.bMAC, Kind: UDP, Payload: 18, Count: uint64(b.N),
				Batch: c.batch, QdiscBypass: c.bypass, Workers: c.workers})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rep.Rate, "pps")
		})
	}
}
