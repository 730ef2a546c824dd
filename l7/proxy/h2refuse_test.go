package proxy

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// refusalH2 sends one request with the given extra fields on a new HTTP/2
// connection (bypassing the checks Go's client makes) and returns the
// response status.
func refusalH2(t *testing.T, l *lab, fields ...hpack.HeaderField) string {
	t.Helper()
	c, err := tls.Dial("tcp", l.addr("https"), &tls.Config{RootCAs: l.roots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "localhost"}, {Name: ":path", Value: "/x"}}, fields...) {
		_ = enc.WriteField(f)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// Read the whole response, up to END_STREAM: the server's write-side
	// scanner sees the body as it is written, so once the client has it,
	// the refusal is counted (returning at HEADERS raced the body's write).
	status := ""
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no response: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				status = f.PseudoValue("status")
				if f.StreamEnded() {
					return status
				}
			}
		case *http2.DataFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				return status
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v) instead of a response", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY (%v) instead of a response", f.ErrCode)
		}
	}
}

// The answers x/net/http2 gives without calling the proxy (431 for a
// header list over the limit, 400 for a connection-specific field) are
// counted in rampart_bad_requests_total like HTTP/1.1's and logged; the
// proxy's own 404 is not counted there.
func TestH2RefusalsAreCounted(t *testing.T) {
	l := newLab(t)
	logs := &logSink{}
	l.p = New(Options{AccessLog: logs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := l.config()
	c.Listeners[0].MaxHeaderBytes = 1024
	l.apply(c)

	if st := refusalH2(t, l); st != "404" {
		t.Fatalf("plain request: status %s, want the proxy's 404", st)
	}
	if st := refusalH2(t, l, hpack.HeaderField{Name: "connection", Value: "close"}); st != "400" {
		t.Fatalf("Connection field: status %s, want 400", st)
	}
	// Over the limit (1024 bytes, which x/net advertises as 1344), but not
	// by so much that x/net closes the connection instead of answering.
	var big []hpack.HeaderField
	for i := 0; i < 3; i++ {
		big = append(big, hpack.HeaderField{Name: "x-big-" + strconv.Itoa(i), Value: strings.Repeat("x", 700)})
	}
	if st := refusalH2(t, l, big...); st != "431" {
		t.Fatalf("2.1 KB of fields over a 1024-byte limit: status %s, want 431", st)
	}
	if n := testutil.ToFloat64(l.p.metrics.badRequests.WithLabelValues("400", "header")); n != 1 {
		t.Errorf("rampart_bad_requests_total{400,header} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(l.p.metrics.badRequests.WithLabelValues("431", "head_too_large")); n != 1 {
		t.Errorf("rampart_bad_requests_total{431,head_too_large} = %v, want 1", n)
	}
	eventually(t, 30*time.Second, "access log lines for both refusals", func() bool {
		s := logs.String()
		return strings.Contains(s, `request header \"Connection\" is not valid in HTTP/2`) &&
			strings.Contains(s, "request header list too large")
	})
}

// HTTP/1.1 parser refusals are logged like HTTP/2's: a line with the
// client's address, the status and the parser's reason.
func TestH1RefusalsAreLogged(t *testing.T) {
	l := newLab(t)
	logs := &logSink{}
	l.p = New(Options{AccessLog: logs, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	l.apply(l.config())
	conn := dialTCP(t, l.addr("http"))
	local := conn.LocalAddr().String()
	rawH1(t, conn, "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
	if n := testutil.ToFloat64(l.p.metrics.badRequests.WithLabelValues("400", "host")); n != 1 {
		t.Errorf("rampart_bad_requests_total{400,host} = %v, want 1", n)
	}
	eventually(t, 30*time.Second, "an access log line for the refusal", func() bool {
		s := logs.String()
		return strings.Contains(s, "refused by the HTTP/1.1 parser: more than one Host field") &&
			strings.Contains(s, local) && strings.Contains(s, `"status":400`)
	})
}
