package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/rampart-edge/rampart/l7/accesslog"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/wire"
)

// checkedTarget is a request's routing input after the checks every
// frontend (HTTP/1.1, HTTP/2, HTTP/3) shares.
type checkedTarget struct {
	path  string // normalised path: routed on and forwarded
	query string // raw query, forwarded as sent
	host  string // normalised host: routed on
}

// Reasons a request is refused before routing, as counted in
// rampart_bad_requests_total{reason}.
const (
	badMethod = "method"
	badHeader = "header"
	badHost   = "host"
	badTarget = "target"
	badPath   = "path"
	badQuery  = "query"
)

// checkRequest validates what the upstream request line and head are built
// from, so that whatever a frontend accepted serialises to an HTTP/1.1 head
// a strict parser reads back as the same request: the method is a token;
// the host a valid authority (r.Host becomes its normal form, the one
// forwarded as Host and X-Forwarded-Host); the path normalises; the query
// has RFC 3986 query bytes only; and on HTTP/2 and HTTP/3 no field value
// starts or ends with white space (RFC 9113 §8.2.1, RFC 9114 §4.2), which
// an HTTP/1.1 parser would trim. It returns a reason and message when the
// request must be answered with 400.
func checkRequest(r *http.Request, slashes route.SlashPolicy) (c checkedTarget, reason, msg string) {
	if r.Method == "" {
		return c, badMethod, "empty method"
	}
	for i := 0; i < len(r.Method); i++ {
		if !wire.IsTokenChar(r.Method[i]) {
			return c, badMethod, "method is not a token"
		}
	}
	if r.ProtoMajor >= 2 {
		for _, vv := range r.Header {
			for _, v := range vv {
				if n := len(v); n > 0 && (isOWS(v[0]) || isOWS(v[n-1])) {
					return c, badHeader, "header field value starts or ends with white space"
				}
			}
		}
	}
	defPort := 80
	if r.TLS != nil {
		defPort = 443
	}
	host, authority, err := route.ParseAuthority(r.Host, defPort)
	if err != nil {
		return c, badHost, "invalid host"
	}
	r.Host = authority
	rawPath, query, ok := splitTarget(r)
	if !ok {
		return c, badTarget, "request target must be a path"
	}
	path, err := route.NormalizePath(rawPath, slashes)
	if err != nil {
		return c, badPath, "bad path"
	}
	if err := route.CheckQuery(query); err != nil {
		return c, badQuery, "bad query"
	}
	return checkedTarget{path: path, query: query, host: host}, "", ""
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

// refused counts a request a protocol server refused before any handler
// ran (h1's parser, x/net's own 431/400) and writes its access log line,
// as an error within the access log's error budget, so refusals of every
// protocol are seen the same way.
func (p *Proxy) refused(remote, proto string, status int, reason, detail string) {
	p.metrics.badRequests.WithLabelValues(strconv.Itoa(status), reason).Inc()
	p.accessLog.Write(&accesslog.Entry{Start: time.Now(), ReqID: requestID(""), Remote: remote, Proto: proto,
		Status: status, Err: detail})
}

// badRequest answers a request checkRequest refused.
func (p *Proxy) badRequest(w http.ResponseWriter, log *accesslog.Entry, reason, msg string) {
	p.metrics.badRequests.WithLabelValues("400", reason).Inc()
	p.reply(w, log, http.StatusBadRequest, msg)
}
