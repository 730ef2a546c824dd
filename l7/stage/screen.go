package stage

import (
	"net"
	"net/http"
	"net/netip"
	"time"
)

// Screen builds the chain that runs before routing, for every request of
// a runtime: the deny screen. (It has one stage today; the order before
// routing is fixed here.)
func Screen(env *Env) Chain {
	return Chain{&screen{env: env}}
}

// screen removes the identity headers a client sent and refuses a client
// address on the deny list (403, rampart_denied_total{match="cidr"}).
// Its reply is not a route's: the proxy counts it as unmatched.
type screen struct{ env *Env }

func (*screen) Name() string { return "deny_screen" }

func (s *screen) Serve(x *Exchange) Verdict {
	s.env.Identity.strip(x.R.Header)
	dl := s.env.Deny.Load()
	if dl == nil || dl.Len() == 0 {
		return Continue
	}
	if reason, denied := dl.CheckIP(clientAddr(x.R.RemoteAddr), time.Now()); denied {
		s.env.Metrics.Denied.WithLabelValues("cidr").Inc()
		x.Log.Security, x.Log.Err = true, "denied: "+reason
		x.Log.Status = http.StatusForbidden
		WriteError(x.W, http.StatusForbidden, "denied", x.Log.ReqID)
		return Replied
	}
	return Continue
}

// ClientIP is the client's address of a RemoteAddr (ip:port, or as is
// when it has no port), as quota keys and X-Forwarded-For carry it.
func ClientIP(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}

// clientAddr parses a request's RemoteAddr (ip:port or a bare ip); an
// IPv4-mapped address is unmapped; the zero Addr when it does not parse.
func clientAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := netip.ParseAddr(remote)
	return a.Unmap()
}
