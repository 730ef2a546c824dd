package proxy

import "github.com/rampart-edge/rampart/l7/handoff"

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
	for _, l := range p.listeners {
		out = append(out, l.Sockets()...)
	}
	return gen, out
}
