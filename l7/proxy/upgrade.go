package proxy

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/upstream"
)

// upgradeProtocol returns the protocol an HTTP/1.1 request asks to switch
// to (Connection: upgrade plus Upgrade: websocket), or "". Only WebSocket
// is tunnelled; other upgrades are forwarded as plain requests.
func upgradeProtocol(r *http.Request) string {
	if r.ProtoMajor != 1 || r.ProtoMinor != 1 || !listedIn(r.Header["Connection"], "Upgrade") {
		return ""
	}
	up := r.Header.Get("Upgrade")
	if !strings.EqualFold(strings.TrimSpace(up), "websocket") {
		return ""
	}
	return up
}

// tunnel completes a protocol upgrade the upstream accepted (101): it
// takes over the client connection, sends it the 101, and copies bytes
// both ways until one side closes, then half-closes the other. The route
// deadline covered the handshake; the tunnel itself lives until either
// side ends it, no byte went either way for the listener's
// tunnel_idle_timeout_ms (both sides are closed), or the proxy shuts down.
func (f *forwarding) tunnel(uc *upstream.Conn) {
	hdr := f.w.Header()
	if !strings.EqualFold(hdr.Get("Upgrade"), f.upgrade) {
		uc.Close()
		f.resetHeader()
		f.fault = faultUpstream
		f.fail(http.StatusBadGateway, "upstream switched to a protocol the client did not ask for")
		return
	}
	hj, ok := f.w.(http.Hijacker)
	if !ok {
		uc.Close()
		f.resetHeader()
		f.fail(http.StatusInternalServerError, "this connection cannot be upgraded")
		return
	}
	cc, crw, err := hj.Hijack()
	if err != nil {
		uc.Close()
		f.log.Err = "hijack: " + err.Error()
		f.log.Status = 499
		return
	}
	f.log.Status = http.StatusSwitchingProtocols
	conn := upstreamKeep(hdr)
	bw := crw.Writer
	_, _ = bw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	for k, vv := range hdr {
		if dropTunnelHeader(k) {
			continue
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	writeField(bw, "Connection", conn)
	writeField(bw, "Upgrade", f.upgrade)
	writeField(bw, "X-Request-Id", f.reqID)
	_, _ = bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		cc.Close()
		uc.Close()
		return
	}
	un := uc.NetConn()
	_ = un.SetDeadline(time.Time{})
	_ = cc.SetDeadline(time.Time{})
	t := f.p.tunnels.add(cc, uc)
	defer f.p.tunnels.remove(t)
	ti := &tunnelIdle{idle: f.tunnelIdle, client: cc, up: un, expired: f.p.metrics.tunnelIdle}
	ti.last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ti.pipe(un, crw.Reader, cc) }()
	go func() { defer wg.Done(); ti.pipe(cc, uc.Reader(), un) }()
	wg.Wait()
	cc.Close()
	uc.Close()
}

func upstreamKeep(h http.Header) string {
	if v := h.Get("Connection"); v != "" {
		return v
	}
	return "Upgrade"
}

func dropTunnelHeader(k string) bool {
	switch k {
	case "Connection", "Upgrade", "Keep-Alive", "Proxy-Connection", "Te", "Transfer-Encoding", "Content-Length", "X-Request-Id":
		return true
	}
	return false
}

// tunnelIdle ends a tunnel in which no byte went either way for idle
// (0: never).
type tunnelIdle struct {
	idle       time.Duration
	last       atomic.Int64 // when a byte last went either way (Unix ns)
	client, up net.Conn
	once       sync.Once
	expired    prometheus.Counter
}

// pipe copies src (with what its reader already buffered, srcConn below
// it) to dst, then half-closes dst so the peer sees the end. A read that
// waits past the idle time while the other direction was quiet too ends
// the tunnel.
func (t *tunnelIdle) pipe(dst net.Conn, src *bufio.Reader, srcConn net.Conn) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		if t.idle > 0 {
			_ = srcConn.SetReadDeadline(time.Unix(0, t.last.Load()).Add(t.idle))
		}
		n, err := src.Read(buf)
		if n > 0 {
			t.last.Store(time.Now().UnixNano())
			if t.idle > 0 {
				_ = dst.SetWriteDeadline(time.Now().Add(t.idle))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				if errors.Is(werr, os.ErrDeadlineExceeded) {
					t.expire() // the peer read nothing for the idle time
				}
				break
			}
		}
		if err != nil {
			if t.idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				if time.Since(time.Unix(0, t.last.Load())) < t.idle {
					continue // the other direction moved meanwhile
				}
				t.expire()
			}
			break
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

// expire closes both sides of an idle tunnel, once.
func (t *tunnelIdle) expire() {
	t.once.Do(func() {
		t.expired.Inc()
		_ = t.client.Close()
		_ = t.up.Close()
	})
}

// tunnelSet tracks open tunnels so shutdown can close them.
type tunnelSet struct {
	mu sync.Mutex
	m  map[*tunnelConns]struct{}
}

type tunnelConns struct {
	client net.Conn
	up     *upstream.Conn
}

func (s *tunnelSet) add(c net.Conn, u *upstream.Conn) *tunnelConns {
	t := &tunnelConns{client: c, up: u}
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*tunnelConns]struct{}{}
	}
	s.m[t] = struct{}{}
	s.mu.Unlock()
	return t
}

func (s *tunnelSet) remove(t *tunnelConns) {
	s.mu.Lock()
	delete(s.m, t)
	s.mu.Unlock()
}

func (s *tunnelSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// closeAll ends every tunnel (at the end of a drain).
func (s *tunnelSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.m {
		_ = t.client.Close()
		_ = t.up.NetConn().Close()
	}
}
