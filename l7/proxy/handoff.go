package proxy

import (
	"net"

	"github.com/rampart-edge/rampart/l7/handoff"
)

// HandoffSockets gives the node agent duplicates of the proxy's listening
// sockets (TCP, and UDP for HTTP/3) so it can steer VIP traffic to them.
// The generation changes with every applied snapshot; with since equal to
// it, nothing is duplicated.
func (p *Proxy) HandoffSockets(since uint64) (uint64, []handoff.Socket) {
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.handoffGen
	if gen == since {
		return gen, nil
	}
	var out []handoff.Socket
	for name, l := range p.listeners {
		if tl, ok := l.ln.(*net.TCPListener); ok {
			if f, err := tl.File(); err == nil {
				out = append(out, handoff.Socket{Listener: name, Network: "tcp", Addr: tl.Addr().String(), File: f})
			}
		}
		if u := l.h3UDP(); u != nil {
			if f, err := u.File(); err == nil {
				out = append(out, handoff.Socket{Listener: name, Network: "udp", Addr: u.LocalAddr().String(), File: f})
			}
		}
	}
	return gen, out
}

// h3UDP is the listener's HTTP/3 socket while it accepts connections.
func (l *listener) h3UDP() *net.UDPConn {
	h := l.h3
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ln == nil || h.released {
		return nil
	}
	return h.udp
}
