package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/rampart-edge/rampart/bpf/netnstest"
	"golang.org/x/sys/unix"
)

func trivialXDP(b *testing.B) *ebpf.Program {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "MIT",
		Instructions: asm.Instructions{asm.LoadImm(asm.R0, 2, asm.DWord), asm.Return()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

// threadCPU is the calling OS thread's CPU time (CLOCK_THREAD_CPUTIME_ID):
// time the thread ran, in ns, not the time it waited for a CPU.
func threadCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatalf("clock_gettime(CLOCK_THREAD_CPUTIME_ID): %v", err)
	}
	return time.Duration(ts.Nano())
}

// testRun runs p n times on frame in one BPF_PROG_TEST_RUN call and returns
// its verdict, the kernel's figure (the call's total / n, which the kernel
// truncates to whole ns) and the CPU time of the n runs, measured from here:
// the thread CPU time of the call minus that of a call with 2 runs just
// before it. That subtracts the per-call cost (syscall, frame copy, and for
// more than one run the XDP dispatcher switch to and from p: ~0.3 ms of CPU
// here, ±0.06 ms), which is 1/n of a run's figure. The caller's goroutine
// must be locked to its thread. A call that a signal interrupted (the
// library restarts it, calling reset) is measured again.
func testRun(b *testing.B, p *ebpf.Program, frame []byte, n int) (ret uint32, kernel, cpu time.Duration) {
	call := func(n int) (uint32, time.Duration, time.Duration) {
		for {
			restarted := false
			t0 := threadCPU(b)
			ret, kernel, err := p.Benchmark(frame, n, func() { restarted = true })
			cpu := threadCPU(b) - t0
			if err != nil {
				b.Fatalf("BPF_PROG_TEST_RUN of %s, %d runs: %v", p, n, err)
			}
			if !restarted {
				return ret, kernel, cpu
			}
		}
	}
	_, _, ovh := call(2)
	ret, kernel, cpu = call(n)
	return ret, kernel, cpu - ovh
}

// BenchmarkXDP reports ns per packet (BPF_PROG_TEST_RUN) for each path next
// to a bare "return XDP_PASS" program on the same frame, alternated in 5
// rounds, with the real clock and a 1,000,000-prefix deny list loaded.
//
// Two figures per program: ns/op, bare-ns/op and x-bare are the thread CPU
// time of each call's runs (testRun) divided by their number, precise to
// ~0.01 ns with 20000000x (n = 4,000,000 per call); kernel-ns/op,
// kernel-bare-ns/op and kernel-x-bare are the kernel's own per-run figure,
// which it truncates to whole ns (a bare 5.9 ns reads as 5: up to 20 % off
// for the bare program, so its ratios read high).
func BenchmarkXDP(b *testing.B) {
	needRoot(b)
	f, err := Open(netnstest.PinRoot(b), &Options{MaxSources: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Remove() })
	if err := f.SetVIPs(testVIPs); err != nil {
		b.Fatal(err)
	}
	if err := f.ReplaceDenyList(bigList(1, 1_000_000, netip.MustParsePrefix("192.0.2.66/32"),
		netip.MustParsePrefix("2001:db8:6:6::66/128"))); err != nil {
		b.Fatal(err)
	}
	// 192.0.2.2's bucket holds as many connections as the cap: its SYNs
	// take the rt_conns lookup (the source itself is one below).
	f.setConns(b, netip.MustParseAddr("192.0.2.2"), 1e6-1)
	bare := trivialXDP(b)
	on := Limits{PPS: 1e9, PPSBurst: 1e9, SYNRate: 1e9, SYNBurst: 1e9, MaxConns: 1e6, NewSources: 1e9}
	v6 := pkt{src: "2001:db8:1::1", dst: "2001:db8::10", proto: 17, sport: 5000, dport: 443}
	cases := []struct {
		name   string
		limits Limits
		frame  []byte
		want   uint32
	}{
		{"non-VIP pass", on, pkt{src: "192.0.2.1", dst: "198.51.100.1", proto: 6, sport: 1, dport: 22}.bytes(), xdpPass},
		{"deny hit", on, tcp4("192.0.2.66", 0).bytes(), xdpDrop},
		{"v6 deny hit in a SPLIT /64", on, pkt{src: "2001:db8:6:6::66", dst: "2001:db8::10", proto: 6, sport: 1, dport: 80}.bytes(), xdpDrop},
		{"v6 known source pass in a SPLIT /64", on, pkt{src: "2001:db8:6:6::67", dst: "2001:db8::10", proto: 6, sport: 1, dport: 80}.bytes(), xdpPass},
		{"known source pass", on, tcp4("192.0.2.1", 0).bytes(), xdpPass},
		{"known source SYN pass", on, tcp4("192.0.2.1", fSYN).bytes(), xdpPass},
		{"known source SYN pass, bucket sum at the cap", on, tcp4("192.0.2.2", fSYN).bytes(), xdpPass},
		{"limit drop", Limits{PPS: 1, PPSBurst: 1}, tcp4("192.0.2.1", 0).bytes(), xdpDrop},
		{"v6 pass", on, v6.bytes(), xdpPass},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := f.SetLimits(c.limits); err != nil {
				b.Fatal(err)
			}
			f.objs.RampartXdp.Test(c.frame) // the source gets state
			runtime.LockOSThread()          // thread CPU time is this thread's
			defer runtime.UnlockOSThread()
			const rounds = 5
			n := max(b.N/rounds, 1)
			var kp, kb, cp, cb time.Duration
			for range rounds {
				ret, k, cpu := testRun(b, f.objs.RampartXdp, c.frame, n)
				if ret != c.want {
					b.Fatalf("verdict %d, want %d", ret, c.want)
				}
				kp, cp = kp+k, cp+cpu
				_, k, cpu = testRun(b, bare, c.frame, n)
				kb, cb = kb+k, cb+cpu
			}
			runs := float64(rounds * n)
			b.ReportMetric(float64(cp)/runs, "ns/op")
			b.ReportMetric(float64(cb)/runs, "bare-ns/op")
			b.ReportMetric(float64(cp)/float64(cb), "x-bare")
			b.ReportMetric(float64(kp)/rounds, "kernel-ns/op")
			b.ReportMetric(float64(kb)/rounds, "kernel-bare-ns/op")
			b.ReportMetric(float64(kp)/float64(kb), "kernel-x-bare")
		})
	}
}

func meminfo(b *testing.B, key string) uint64 {
	fh, err := os.Open("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == key+":" {
			v, _ := strconv.ParseUint(fs[1], 10, 64)
			return v << 10
		}
	}
	b.Fatalf("no %s in /proc/meminfo", key)
	return 0
}

// BenchmarkReplaceDenyList1M: full swaps between two 1,000,000-prefix lists
// (900k IPv4, 100k IPv6); reports the live tries' memlock and the kernel's
// unreclaimable slab growth over an empty list.
func BenchmarkReplaceDenyList1M(b *testing.B) {
	needRoot(b)
	f, err := Open(netnstest.PinRoot(b), &Options{MaxSources: 1024})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Remove() })
	lists := [][]netip.Prefix{bigList(1, 1_000_000), bigList(2, 1_000_000)}
	time.Sleep(100 * time.Millisecond)
	slab0 := meminfo(b, "SUnreclaim")
	b.ResetTimer()
	for i := range b.N {
		if err := f.ReplaceDenyList(lists[i%2]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var ml uint64
	for _, m := range []*ebpf.Map{f.deny4.m, f.deny6.m} {
		info, err := m.Info()
		if err != nil {
			b.Fatal(err)
		}
		v, _ := info.Memlock()
		ml += v
	}
	time.Sleep(time.Second) // old tries are freed after an RCU grace period
	b.ReportMetric(float64(ml)/(1<<20), "memlock-MiB")
	b.ReportMetric(float64(int64(meminfo(b, "SUnreclaim"))-int64(slab0))/(1<<20), "slab-MiB")
}

// BenchmarkVethFlood floods the server veth (native XDP) from the client
// namespace with AF_PACKET sendmmsg, one sender per CPU, from a deny-listed
// source (or, with sub-benchmark "limit", an over-limit one), and reports the
// drop rate, the drops per busy CPU-second (sender and XDP share the CPUs:
// veth runs the receiver's NAPI on the sending CPU) and the program's own
// ns per packet from kernel BPF stats.
func BenchmarkVethFlood(b *testing.B) {
	l := newLab(b, Options{MaxSources: 1 << 16})
	big := bigList(1, 1_000_000, netip.MustParsePrefix("192.0.2.3/32"))
	for _, c := range []struct {
		name   string
		reason Reason
		setup  func(f *Filter) error
	}{
		{"deny", DropDeny, func(f *Filter) error {
			return errors.Join(f.SetLimits(Limits{}), f.ReplaceDenyList(big))
		}},
		{"limit", DropPPS, func(f *Filter) error {
			return errors.Join(f.ReplaceDenyList(nil), f.SetLimits(Limits{PPS: 10, PPSBurst: 10}))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if err := c.setup(l.f); err != nil {
				b.Fatal(err)
			}
			stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
			if err != nil {
				b.Fatal(err)
			}
			defer stats.Close()
			var dst net.HardwareAddr
			l.s.Do(b, func() {
				ifc, err := net.InterfaceByName(l.ifname)
				if err != nil {
					b.Fatal(err)
				}
				dst = ifc.HardwareAddr
			})
			frame := pkt{src: "192.0.2.3", dst: "203.0.113.10", proto: 17, sport: 999, dport: udpPort, payload: 18}.bytes()
			copy(frame, dst)
			cif := strings.Replace(l.ifname, "rts", "rtc", 1)
			var fds []int
			for range 2 {
				l.c.Do(b, func() { fds = append(fds, packetSocket(b, cif)) })
			}
			c0, s0 := l.counters(b), progStats(b, l.f)
			busy0, soft0, total0 := cpuTimes(b)
			start := time.Now()
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				fd := fds[next.Add(1)%int64(len(fds))]
				sendBatches(b, fd, frame, pb)
			})
			b.StopTimer()
			el := time.Since(start)
			busy1, soft1, total1 := cpuTimes(b)
			c1, s1 := l.counters(b), progStats(b, l.f)
			drops := float64(c1[c.reason] - c0[c.reason])
			ncpu := float64(runtime.NumCPU())
			cores := float64(busy1-busy0) / float64(total1-total0) * ncpu
			soft := float64(soft1-soft0) / float64(total1-total0) * ncpu
			b.ReportMetric(drops/el.Seconds(), "drops/s")
			b.ReportMetric(drops/el.Seconds()/cores, "drops/s/busy-core")
			b.ReportMetric(drops/el.Seconds()/soft, "drops/s/softirq-core")
			b.ReportMetric(float64(s1.Runtime-s0.Runtime)/float64(s1.RunCount-s0.RunCount), "xdp-ns/pkt")
			b.ReportMetric(0, "ns/op")
			for _, fd := range fds {
				unix.Close(fd)
			}
		})
	}
}

func progStats(b *testing.B, f *Filter) *ebpf.ProgramStats {
	s, err := f.objs.RampartXdp.Stats()
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// cpuTimes returns busy, softirq and total jiffies over all CPUs (/proc/stat).
func cpuTimes(b *testing.B) (busy, softirq, total uint64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	fs := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])[1:]
	for i, s := range fs {
		v, _ := strconv.ParseUint(s, 10, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
		if i == 6 {
			softirq = v
		}
	}
	return busy, softirq, total
}

func packetSocket(b *testing.B, ifname string) int {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		b.Fatal(err)
	}
	sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Protocol: htons(unix.ETH_P_IP)}
	if err := unix.Bind(fd, sa); err != nil {
		b.Fatal(err)
	}
	return fd
}

// sendBatches sends the frame 64 times per sendmmsg call, once per pb.Next.
func sendBatches(b *testing.B, fd int, frame []byte, pb *testing.PB) {
	const batch = 64
	iov := unix.Iovec{Base: &frame[0]}
	iov.SetLen(len(frame))
	msgs := make([]unix.Mmsghdr, batch)
	for i := range msgs {
		msgs[i].Hdr.Iov = &iov
		msgs[i].Hdr.Iovlen = 1
	}
	for pb.Next() {
		_, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch, 0, 0, 0)
		if e != 0 && e != unix.ENOBUFS && e != unix.EAGAIN {
			b.Error(e)
			return
		}
	}
}

// BenchmarkDenyListChange1M: one prefix added or removed in a loaded
// 1,000,000-prefix list (applied in place).
func BenchmarkDenyListChange1M(b *testing.B) {
	needRoot(b)
	f, err := Open(netnstest.PinRoot(b), &Options{MaxSources: 1024})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Remove() })
	list := bigList(1, 1_000_000)
	lists := [][]netip.Prefix{list, append(list[:len(list):len(list)], netip.MustParsePrefix("192.0.2.0/24"))}
	if err := f.ReplaceDenyList(list); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if err := f.ReplaceDenyList(lists[(i+1)%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// slabBytes reads /proc/slabinfo: bytes held (num_objs × objsize) per cache.
func slabBytes(b *testing.B) map[string]int64 {
	data, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(data), "\n")[2:] {
		fs := strings.Fields(l)
		if len(fs) < 4 {
			continue
		}
		n, _ := strconv.ParseInt(fs[2], 10, 64)
		sz, _ := strconv.ParseInt(fs[3], 10, 64)
		out[fs[0]] = n * sz
	}
	return out
}

// deny1M is 1,000,000 distinct prefixes of one family with the length mix
// of l7/deny's benchmarks: IPv4 70% /32, 25% /24, 5% /16–/23; IPv6 (in
// 2000::/3) 40% /128, 30% /64, 20% /48, 10% /32–/47.
func deny1M(v6 bool) []netip.Prefix {
	r := rand.New(rand.NewPCG(7, 7))
	seen := make(map[netip.Prefix]bool, 1_000_000)
	out := make([]netip.Prefix, 0, 1_000_000)
	for len(out) < 1_000_000 {
		var p netip.Prefix
		k := r.IntN(100)
		if v6 {
			var a [16]byte
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			a[0] = 0x20 | a[0]&0x1f
			bits := 32 + r.IntN(16)
			switch {
			case k < 40:
				bits = 128
			case k < 70:
				bits = 64
			case k < 90:
				bits = 48
			}
			p = netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()
		} else {
			a := netip.AddrFrom4([4]byte{byte(1 + r.IntN(223)), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())})
			bits := 16 + r.IntN(8)
			switch {
			case k < 70:
				bits = 32
			case k < 95:
				bits = 24
			}
			p = netip.PrefixFrom(a, bits).Masked()
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// BenchmarkDenyMemory loads 1,000,000 IPv4 (or IPv6) prefixes into an
// empty deny list and reports the kernel memory that takes: slab growth
// per entry (/proc/slabinfo, all caches; the largest growths logged),
// SUnreclaim growth and the tries' memlock (what bpftool shows).
func BenchmarkDenyMemory(b *testing.B) {
	needRoot(b)
	for _, fam := range []string{"v4", "v6"} {
		b.Run(fam, func(b *testing.B) {
			list := deny1M(fam == "v6")
			f, err := Open(netnstest.PinRoot(b), &Options{MaxSources: 1024})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Remove()
			var slab, sunr, ml, trieEntries float64
			for b.Loop() {
				if err := f.ReplaceDenyList(nil); err != nil {
					b.Fatal(err)
				}
				time.Sleep(2 * time.Second) // freed trie nodes go after an RCU grace period
				s0, u0 := slabBytes(b), meminfo(b, "SUnreclaim")
				if err := f.ReplaceDenyList(list); err != nil {
					b.Fatal(err)
				}
				time.Sleep(2 * time.Second)
				s1, u1 := slabBytes(b), meminfo(b, "SUnreclaim")
				var grew []string
				slab = 0
				for name, v := range s1 {
					if d := v - s0[name]; d != 0 {
						slab += float64(d)
						if d > 1<<20 {
							grew = append(grew, fmt.Sprintf("%s +%.1f MiB", name, float64(d)/(1<<20)))
						}
					}
				}
				sunr = float64(int64(u1) - int64(u0))
				ml, trieEntries = 0, float64(len(f.deny4.ents)+len(f.deny6.ents))
				for _, m := range []*ebpf.Map{f.deny4.m, f.deny6.m} {
					info, err := m.Info()
					if err != nil {
						b.Fatal(err)
					}
					v, _ := info.Memlock()
					ml += float64(v)
				}
				b.Logf("%s: %d prefixes, %.0f trie entries; slab caches that grew: %s", fam, len(list), trieEntries, strings.Join(grew, ", "))
			}
			n := float64(len(list))
			b.ReportMetric(slab/n, "slab-B/prefix")
			b.ReportMetric(sunr/n, "SUnreclaim-B/prefix")
			b.ReportMetric(ml/n, "memlock-B/prefix")
			b.ReportMetric(slab/(1<<20), "slab-MiB")
			b.ReportMetric(ml/(1<<20), "memlock-MiB")
			b.ReportMetric(0, "ns/op")
		})
	}
}
