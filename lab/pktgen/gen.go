package pktgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config says what to send where, how fast and for how long.
type Config struct {
	NetNS string // network namespace to send from (a path like /run/netns/NAME); "" = the caller's
	Iface string // interface to send on (in NetNS)

	SrcCIDR    netip.Prefix // sources are spoofed from it
	Sequential bool         // sources in order instead of at random
	SrcPort    uint16       // 0: 49152 + packet number mod 16384
	Dst        netip.AddrPort
	Kind       Kind // default SYN
	Payload    int  // bytes of payload (zeros)

	SrcMAC net.HardwareAddr // default: the interface's
	DstMAC net.HardwareAddr // default: the neighbour entry of the next hop to Dst (resolved by sending it one UDP datagram)

	Rate     float64       // frames per second over all workers; 0 = as fast as the socket takes them
	Duration time.Duration // stop after this long (0: no limit; Count or ctx must end the run)
	Count    uint64        // stop after this many frames (0: no limit)

	Batch       int    // frames per sendmmsg (default 64, at most 1024)
	Workers     int    // sockets, each on its own goroutine (default 1)
	QdiscBypass bool   // PACKET_QDISC_BYPASS: straight to the driver, no qdisc
	Seed        uint64 // random sources: generator seed (worker i uses Seed+i)
}

// Report is what a run sent.
type Report struct {
	Sent     uint64        // frames the kernel took
	Busy     uint64        // sendmmsg calls refused with ENOBUFS/EAGAIN (retried)
	Elapsed  time.Duration // first send to last
	Rate     float64       // Sent / Elapsed, frames per second
	Config   Config
	FrameLen int
}

func (r Report) String() string {
	c := r.Config
	rate := "as fast as possible"
	if c.Rate > 0 {
		rate = fmt.Sprintf("target %.0f pps", c.Rate)
	}
	return fmt.Sprintf("sent %d %s frames (%d bytes) from %v to %v on %s in %v: %.0f pps (%s; batch %d, %d worker(s), qdisc bypass %v, %d busy retries)",
		r.Sent, c.Kind, r.FrameLen, c.SrcCIDR, c.Dst, c.Iface, r.Elapsed.Round(time.Millisecond), r.Rate, rate, c.Batch, c.Workers, c.QdiscBypass, r.Busy)
}

func (c *Config) defaults() error {
	if c.Kind == 0 {
		c.Kind = SYN
	}
	if c.Batch <= 0 {
		c.Batch = 64
	}
	if c.Batch > 1024 {
		return fmt.Errorf("pktgen: batch %d is above 1024", c.Batch)
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Iface == "" {
		return errors.New("pktgen: no interface")
	}
	if !c.SrcCIDR.IsValid() || !c.Dst.IsValid() || c.SrcCIDR.Addr().Is4() != c.Dst.Addr().Is4() {
		return fmt.Errorf("pktgen: source prefix %v and destination %v must be of one family", c.SrcCIDR, c.Dst)
	}
	if c.Rate < 0 || c.Payload < 0 {
		return fmt.Errorf("pktgen: rate %v and payload %d must not be negative", c.Rate, c.Payload)
	}
	if c.Duration <= 0 && c.Count == 0 {
		return errors.New("pktgen: neither a duration nor a count: the run would not end")
	}
	return nil
}

// Run sends frames as c says until its count or duration is reached or
// ctx ends, and reports what was sent. An error from the socket ends the
// run; the report says what was sent until then.
func Run(ctx context.Context, c Config) (Report, error) {
	if err := c.defaults(); err != nil {
		return Report{Config: c}, err
	}
	var fds []int
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	var ifc *net.Interface
	err := inNetNS(c.NetNS, func() error {
		var err error
		if ifc, err = net.InterfaceByName(c.Iface); err != nil {
			return fmt.Errorf("pktgen: interface %s: %w", c.Iface, err)
		}
		if c.SrcMAC == nil {
			c.SrcMAC = ifc.HardwareAddr
		}
		if c.DstMAC == nil {
			if c.DstMAC, err = resolveNextHop(ctx, ifc, c.Dst.Addr()); err != nil {
				return err
			}
		}
		for range c.Workers {
			fd, err := packetSocket(ifc.Index, c.QdiscBypass)
			if err != nil {
				return err
			}
			fds = append(fds, fd)
		}
		return nil
	})
	defer closeAll()
	rep := Report{Config: c}
	if err != nil {
		return rep, err
	}
	spec := Spec{DstMAC: c.DstMAC, SrcMAC: c.SrcMAC, Dst: c.Dst.Addr(), Kind: c.Kind, SrcPort: c.SrcPort,
		DstPort: c.Dst.Port(), Seq: 0x72616d70, Ack: 0x61727421, Payload: make([]byte, c.Payload)}
	st, err := newStamp(spec)
	if err != nil {
		return rep, fmt.Errorf("pktgen: %w", err)
	}
	rep.FrameLen = len(st.frame)

	var deadline time.Time
	start := time.Now()
	if c.Duration > 0 {
		deadline = start.Add(c.Duration)
	}
	type result struct {
		sent, busy uint64
		end        time.Time
		err        error
	}
	res := make([]result, c.Workers)
	var wg sync.WaitGroup
	for i, fd := range fds {
		src, err := NewSources(c.SrcCIDR, c.Sequential, uint64(i), uint64(c.Workers), c.Seed+uint64(i))
		if err != nil {
			return rep, fmt.Errorf("pktgen: %w", err)
		}
		w := worker{fd: fd, st: st, src: src, batch: c.Batch, n: uint64(i), step: uint64(c.Workers)}
		w.count = c.Count / uint64(c.Workers)
		if uint64(i) < c.Count%uint64(c.Workers) {
			w.count++
		}
		if c.Count > 0 && w.count == 0 {
			continue
		}
		w.rate = c.Rate / float64(c.Workers)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &res[i]
			r.sent, r.busy, r.err = w.run(ctx, start, deadline)
			r.end = time.Now()
		}()
	}
	wg.Wait()
	var errs []error
	end := start
	for _, r := range res {
		rep.Sent += r.sent
		rep.Busy += r.busy
		if r.end.After(end) {
			end = r.end
		}
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	rep.Elapsed = end.Sub(start)
	if rep.Elapsed > 0 {
		rep.Rate = float64(rep.Sent) / rep.Elapsed.Seconds()
	}
	return rep, errors.Join(errs...)
}

type worker struct {
	fd      int
	st      *stamp
	src     *Sources
	batch   int
	count   uint64 // 0: no limit
	rate    float64
	n, step uint64 // packet number (for the source port), advanced by step
}

// run sends until count, deadline or ctx, pacing to rate by sending at
// most what is due (the frames whose time has come since start), at most
// a batch at once, and sleeping until the next is due.
func (w *worker) run(ctx context.Context, start, deadline time.Time) (sent, busy uint64, err error) {
	fl := len(w.st.frame)
	buf := make([]byte, fl*w.batch)
	iovs := make([]unix.Iovec, w.batch)
	msgs := make([]unix.Mmsghdr, w.batch)
	for i := range w.batch {
		copy(buf[i*fl:], w.st.frame)
		iovs[i].Base = &buf[i*fl]
		iovs[i].SetLen(fl)
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.Iovlen = 1
	}
	done := ctx.Done()
	for {
		select {
		case <-done:
			return sent, busy, nil
		default:
		}
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return sent, busy, nil
		}
		k := uint64(w.batch)
		if w.count > 0 {
			if sent >= w.count {
				return sent, busy, nil
			}
			k = min(k, w.count-sent)
		}
		if w.rate > 0 {
			due := uint64(now.Sub(start).Seconds()*w.rate) + 1
			if due <= sent {
				next := start.Add(time.Duration(float64(sent) / w.rate * 1e9))
				if !deadline.IsZero() && next.After(deadline) {
					next = deadline
				}
				sleep(ctx, next.Sub(now))
				continue
			}
			k = min(k, due-sent)
		}
		for i := range int(k) {
			w.st.write(buf[i*fl:(i+1)*fl], w.src, w.n)
			w.n += w.step
		}
		for off := uint64(0); off < k; {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(w.fd), uintptr(unsafe.Pointer(&msgs[off])), uintptr(k-off), 0, 0, 0)
			switch e {
			case 0:
				off += uint64(r)
				sent += uint64(r)
			case unix.ENOBUFS, unix.EAGAIN, unix.EINTR:
				busy++
				runtime.Gosched()
			default:
				return sent, busy, fmt.Errorf("pktgen: sendmmsg: %w", e)
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// packetSocket opens an AF_PACKET raw socket that sends on ifindex and
// receives nothing (bound with protocol 0).
func packetSocket(ifindex int, bypass bool) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("pktgen: AF_PACKET socket (needs CAP_NET_RAW): %w", err)
	}
	if bypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("pktgen: PACKET_QDISC_BYPASS: %w", err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("pktgen: bind AF_PACKET socket to interface %d: %w", ifindex, err)
	}
	return fd, nil
}

// inNetNS runs fn on a thread switched into the namespace at path ("" :
// the caller's). Sockets fn creates stay in that namespace.
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("pktgen: network namespace: %w", err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked when the goroutine ends, so it dies
		// with it instead of going back to the pool in another namespace.
		runtime.LockOSThread()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("pktgen: enter network namespace %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
