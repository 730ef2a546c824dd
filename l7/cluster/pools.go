package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/rampart-edge/rampart/l7/upstream"
)

// poolKey identifies a connection pool; a pool survives a snapshot swap when
// its endpoint address and settings are unchanged.
type poolKey struct {
	cluster string
	addr    string
	cfg     upstream.PoolConfig
}

// pools owns the upstream connection pools across runtimes.
type pools struct {
	mu sync.Mutex
	m  map[poolKey]*upstream.Pool
}

func (p *pools) get(k poolKey) *upstream.Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[poolKey]*upstream.Pool{}
	}
	pl := p.m[k]
	if pl == nil {
		pl = upstream.NewPool(k.addr, k.cfg)
		p.m[k] = pl
	}
	return pl
}

// retain closes every pool that clusters do not use.
func (p *pools) retain(clusters map[string]*Cluster) {
	keep := map[*upstream.Pool]bool{}
	for _, c := range clusters {
		for _, e := range c.endpoints {
			keep[e.Pool] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pl := range p.m {
		if !keep[pl] {
			pl.Close()
			delete(p.m, k)
		}
	}
}

func (p *pools) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pl := range p.m {
		pl.Close()
		delete(p.m, k)
	}
}

// h2cTransports keeps one HTTP/2 (cleartext, prior knowledge) transport per
// cluster, across snapshot swaps; it multiplexes streams over its own
// connections to each endpoint.
type h2cTransports struct {
	mu sync.Mutex
	m  map[string]*http2.Transport
}

// H2C returns the cluster's HTTP/2 cleartext transport (clusters with
// protocol h2c), made on first use; it lives until the set is closed.
func (s *Set) H2C(c *Cluster) *http2.Transport {
	return s.h2c.get(c.Name, time.Duration(c.Config.ConnectTimeoutMs)*time.Millisecond)
}

func (h *h2cTransports) get(cluster string, connectTimeout time.Duration) *http2.Transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*http2.Transport{}
	}
	tr := h.m[cluster]
	if tr == nil {
		d := &net.Dialer{Timeout: connectTimeout}
		d.SetMultipathTCP(false)
		tr = &http2.Transport{
			AllowHTTP: true,
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
			ReadIdleTimeout: 30 * time.Second,
			PingTimeout:     5 * time.Second,
		}
		h.m[cluster] = tr
	}
	return tr
}

func (h *h2cTransports) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, tr := range h.m {
		tr.CloseIdleConnections()
		delete(h.m, k)
	}
}
