package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

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
// side ends it or the proxy shuts down.
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
		f.log.err = "hijack: " + err.Error()
		f.log.status = 499
		return
	}
	f.log.status = http.StatusSwitchingProtocols
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
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pipe(un, crw.Reader) }()
	go func() { defer wg.Done(); pipe(cc, uc.Reader()) }()
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

// pipe copies src (with what its reader already buffered) to dst, then
// half-closes dst so the peer sees the end.
func pipe(dst net.Conn, src *bufio.Reader) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = dst.Close()
	}
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
