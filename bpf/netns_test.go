package bpf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/bpf/netnstest"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

func listenConfig() *net.ListenConfig {
	lc := &net.ListenConfig{}
	lc.SetMultipathTCP(false) // SOCKMAP takes TCP sockets only
	return lc
}

// withSockopt sets an IPPROTO_IPV6 option before bind.
func withSockopt(opt, v int) *net.ListenConfig {
	lc := listenConfig()
	lc.Control = func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, opt, v) })
		return errors.Join(err, serr)
	}
	return lc
}

// proxy is a stand-in for the proxy: TCP and UDP echo servers that answer
// "<proto> <local addr> <line>". A UDP reply carries the socket's port, so
// UDP sockets bind the VIP's port (udpPort) and answer from the datagram's
// destination address (IP_PKTINFO / IPV6_PKTINFO).
type proxy struct {
	tcp4, tcp6 net.Listener
	udp4, udp6 *net.UDPConn
	wg         sync.WaitGroup
	mu         sync.Mutex
	udpFrom    map[string]int // datagrams received per source IP
}

const udpPort = 8443

func startProxy(t testing.TB, ns *netnstest.NS) *proxy {
	t.Helper()
	p := &proxy{udpFrom: map[string]int{}}
	ns.Do(t, func() {
		ctx := context.Background()
		var err error
		if p.tcp4, err = listenConfig().Listen(ctx, "tcp4", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		// Bound to a specific IPv6 address, a socket is IPv6-only (the
		// kernel sets it on bind), and sk_lookup gives it no IPv4 traffic.
		if p.tcp6, err = listenConfig().Listen(ctx, "tcp6", "[::1]:0"); err != nil {
			t.Fatal(err)
		}
		c, err := listenConfig().ListenPacket(ctx, "udp4", fmt.Sprintf("127.0.0.1:%d", udpPort))
		if err != nil {
			t.Fatal(err)
		}
		p.udp4 = c.(*net.UDPConn)
		// IPV6_PKTINFO accepts a source address that is only covered by a
		// local route (not configured) with IPV6_FREEBIND.
		lc := withSockopt(unix.IPV6_FREEBIND, 1)
		if c, err = lc.ListenPacket(ctx, "udp6", fmt.Sprintf("[::1]:%d", udpPort)); err != nil {
			t.Fatal(err)
		}
		p.udp6 = c.(*net.UDPConn)
	})
	for _, l := range []net.Listener{p.tcp4, p.tcp6} {
		p.wg.Add(1)
		go p.serveTCP(l)
	}
	p.wg.Add(2)
	go p.serveUDP4(t)
	go p.serveUDP6(t)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) close() {
	p.tcp4.Close()
	p.tcp6.Close()
	p.udp4.Close()
	p.udp6.Close()
	p.wg.Wait()
}

func (p *proxy) register(t testing.TB, f *Filter) {
	t.Helper()
	for i, c := range []syscall.Conn{p.tcp4.(*net.TCPListener), p.udp4, p.tcp6.(*net.TCPListener), p.udp6} {
		if err := f.RegisterSocket(uint32(i), c); err != nil {
			t.Fatal(err)
		}
	}
}

func (p *proxy) serveTCP(l net.Listener) {
	defer p.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				fmt.Fprintf(c, "tcp %s %s", c.LocalAddr(), line)
			}
		}()
	}
}

func (p *proxy) seen(src string) {
	p.mu.Lock()
	p.udpFrom[src]++
	p.mu.Unlock()
}

func (p *proxy) received(src string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.udpFrom[src]
}

func (p *proxy) serveUDP4(t testing.TB) {
	defer p.wg.Done()
	pc := ipv4.NewPacketConn(p.udp4)
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		t.Error(err)
		return
	}
	buf := make([]byte, 2048)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		p.seen(src.(*net.UDPAddr).IP.String())
		if cm == nil {
			continue
		}
		msg := fmt.Sprintf("udp %s %s", cm.Dst, buf[:n])
		_, _ = pc.WriteTo([]byte(msg), &ipv4.ControlMessage{Src: cm.Dst}, src)
	}
}

func (p *proxy) serveUDP6(t testing.TB) {
	defer p.wg.Done()
	pc := ipv6.NewPacketConn(p.udp6)
	if err := pc.SetControlMessage(ipv6.FlagDst, true); err != nil {
		t.Error(err)
		return
	}
	buf := make([]byte, 2048)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		p.seen(src.(*net.UDPAddr).IP.String())
		if cm == nil {
			continue
		}
		msg := fmt.Sprintf("udp %s %s", cm.Dst, buf[:n])
		_, _ = pc.WriteTo([]byte(msg), &ipv6.ControlMessage{Src: cm.Dst}, src)
	}
}

// ask sends one line to addr over proto from inside ns and returns the
// answer, or an error on timeout / refusal.
func ask(t testing.TB, ns *netnstest.NS, proto, addr, line string, timeout time.Duration) (string, error) {
	t.Helper()
	var c net.Conn
	var err error
	ns.Do(t, func() { c, err = net.DialTimeout(proto, addr, timeout) })
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

func mustAsk(t testing.TB, ns *netnstest.NS, proto, addr, want string) {
	t.Helper()
	got, err := ask(t, ns, proto, addr, "hi", 2*time.Second)
	if err != nil || got != want+" hi" {
		t.Fatalf("%s %s: got %q, %v; want %q", proto, addr, got, err, want+" hi")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
