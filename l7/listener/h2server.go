package listener

import (
	"net/http"
	"strings"

	"github.com/rampart-edge/rampart/l7/h1"
	"github.com/rampart-edge/rampart/l7/h2"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// DefaultH2Server is the HTTP/2 server of a listener whose h2_server is
// empty: "rampart" (l7/h2) or "std" (x/net/http2). rampart's passes every
// HTTP/2 test of the proxy suite that x/net's does, h2spec 143/145 (x/net
// 140/145), and costs less per request (l7/h2/README.md). Tests of other
// packages set it to run their HTTP/2 cases on either server.
var DefaultH2Server = "rampart"

// H2ServerOf is the HTTP/2 server a listener config selects.
func H2ServerOf(cfg snapshot.Listener) string {
	if cfg.H2Server != "" {
		return cfg.H2Server
	}
	return DefaultH2Server
}

// rampartH2 is l7/h2's server with the listener's settings: the same
// bounds x/net's gets (streams, header list as x/net sizes it from
// max_header_bytes, upload windows, timeouts), the rapid-reset rate, and
// abuse and refusals reported like the x/net path's guard does.
func (l *Listener) rampartH2(cfg snapshot.Listener, handler http.Handler, h1s *h1.Server) *h2.Server {
	m := l.env.Metrics
	return &h2.Server{
		Handler:              handler,
		MaxConcurrentStreams: uint32(cfg.H2MaxConcurrentStreams),
		// x/net: max_header_bytes plus 32 bytes for each of 10 typical fields
		MaxHeaderListSize:  uint32(cfg.MaxHeaderBytes + 320),
		StreamWindow:       256 << 10,
		ConnWindow:         1 << 20,
		ReadHeaderTimeout:  h1s.ReadHeaderTimeout,
		IdleTimeout:        h1s.IdleTimeout,
		MaxResetsPerSecond: cfg.H2MaxResetsPerSecond,
		Logger:             l.env.Log,
		Abuse: func(remote, reason string) {
			m.H2Abuse.WithLabelValues(reason).Inc()
			l.env.Log.Warn("closing abusive HTTP/2 connection", "listener", cfg.Name, "remote", remote, "reason", reason)
		},
		Rejected: func(remote string, status int, detail string) {
			reason := "header"
			if status == http.StatusRequestHeaderFieldsTooLarge {
				reason = "head_too_large"
			}
			l.env.Refused(remote, "HTTP/2.0", status, reason, "refused by the HTTP/2 server: "+strings.TrimSuffix(detail, "\n"))
		},
	}
}
