package proxy

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/stage"
)

// writeHead writes the upstream request line and header section. The path
// is the normalised one the route was chosen on, so the upstream sees
// exactly what was matched. An HTTP/1.0 request may come without Host;
// HTTP/1.1 requires one (RFC 9112 §3.2), so the endpoint's address
// stands in, as net/http's Transport and nginx's proxy_pass do (an
// upstream would otherwise answer 400 and close its connection).
func (f *forwarding) writeHead(bw *bufio.Writer, endpoint string) {
	r := f.r
	_, _ = bw.WriteString(r.Method)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(f.path)
	if f.query != "" {
		_ = bw.WriteByte('?')
		_, _ = bw.WriteString(f.query)
	}
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	if r.Host != "" {
		_, _ = bw.WriteString(r.Host)
	} else {
		_, _ = bw.WriteString(endpoint)
	}
	_, _ = bw.WriteString("\r\n")
	for k, vv := range r.Header {
		if dropRequestHeader(k) {
			continue
		}
		if k == "Cookie" && len(vv) > 1 {
			// HTTP/2 may split cookies; HTTP/1.1 wants one field (RFC 9113 §8.2.3).
			writeField(bw, k, strings.Join(vv, "; "))
			continue
		}
		for _, v := range vv {
			writeField(bw, k, v)
		}
	}
	_, _ = bw.WriteString("X-Forwarded-For: ")
	for _, v := range r.Header["X-Forwarded-For"] {
		_, _ = bw.WriteString(v)
		_, _ = bw.WriteString(", ")
	}
	_, _ = bw.WriteString(stage.ClientIP(r.RemoteAddr))
	if r.TLS != nil {
		_, _ = bw.WriteString("\r\nX-Forwarded-Proto: https\r\n")
	} else {
		_, _ = bw.WriteString("\r\nX-Forwarded-Proto: http\r\n")
	}
	if r.Host != "" {
		writeField(bw, "X-Forwarded-Host", r.Host)
	}
	writeField(bw, "X-Request-Id", f.reqID)
	var num [20]byte
	left := time.Until(f.deadline).Milliseconds()
	if left < 1 {
		left = 1
	}
	writeField(bw, "X-Rampart-Timeout-Ms", string(strconv.AppendInt(num[:0], left, 10)))
	if f.upgrade != "" {
		writeField(bw, "Connection", "Upgrade")
		writeField(bw, "Upgrade", f.upgrade)
	}
	if f.attempt > 1 {
		writeField(bw, "X-Rampart-Attempt", strconv.Itoa(f.attempt))
	}
	if f.hasBody {
		if f.bodyLen >= 0 {
			writeField(bw, "Content-Length", string(strconv.AppendInt(num[:0], f.bodyLen, 10)))
		} else {
			_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
		}
	}
	_, _ = bw.WriteString("\r\n")
}

func writeField(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	_, _ = bw.WriteString(v)
	_, _ = bw.WriteString("\r\n")
}

// dropRequestHeader names the fields a proxy must not pass on (hop-by-hop,
// RFC 9110 §7.6.1) and those rampart writes itself.
func dropRequestHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding",
		"Upgrade", "Expect", "Content-Length", "Host", "X-Forwarded-For", "X-Forwarded-Proto",
		"X-Forwarded-Host", "X-Request-Id", "X-Rampart-Timeout-Ms", "X-Rampart-Attempt", "Http2-Settings":
		return true
	}
	return false
}

// dropConnectionListed removes, as a request arrives, every field its
// Connection header names (RFC 9110 §7.6.1: they are for this hop only),
// so that nothing the proxy adds later (identity headers, header rules)
// can be named away by the client. Fields the proxy itself reads as
// hop-by-hop and never forwards as sent stay for it to read (Upgrade for
// a WebSocket upgrade, TE for gRPC); they are dropped when forwarding.
func dropConnectionListed(h http.Header) {
	conn := h["Connection"]
	if len(conn) == 0 {
		return
	}
	for _, v := range conn {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok == "" {
				continue
			}
			k := http.CanonicalHeaderKey(tok)
			if !hopByHop(k) {
				delete(h, k)
			}
		}
	}
}

func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// stripHopByHop removes hop-by-hop fields from an upstream response. The
// Trailer field stays: it announces end-to-end trailers (RFC 9110 §6.6.2),
// and the HTTP/1.1 server needs it to send them.
func stripHopByHop(h http.Header) {
	// One pass over the (small) map with the names compared by a switch,
	// instead of six deletes that each hash a name, and the Connection
	// tokens cut without allocating (the usual "keep-alive" and "close"
	// need no canonical copy): 2.4 % of the proxy's CPU under h2load before
	// (go test -run "^$" -bench BenchmarkStripHopByHop -count 3 ./l7/proxy:
	// 518-611 ns and 2 allocs before, 351-378 ns and 0 after, copy included).
	var conn []string
	for k, v := range h {
		switch k {
		case "Connection":
			conn = v
			delete(h, k)
		case "Proxy-Connection", "Keep-Alive", "Te", "Transfer-Encoding", "Upgrade":
			delete(h, k)
		}
	}
	for _, v := range conn {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			switch tok = strings.TrimSpace(tok); {
			case tok == "", strings.EqualFold(tok, "keep-alive"): // Keep-Alive went above
			case strings.EqualFold(tok, "close"):
				delete(h, "Close")
			default:
				delete(h, http.CanonicalHeaderKey(tok))
			}
		}
	}
}

// listedIn reports whether header k is named in a Connection field.
func listedIn(conn []string, k string) bool {
	for _, v := range conn {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}
