package proxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// h2Attack opens a raw HTTP/2 connection and sends n streams, each reset
// right after its HEADERS (rapid reset), or one header block split into n
// CONTINUATION frames. It then waits for the server to close the
// connection and returns the error that ended it: a write error once the
// server has gone, or else the read error that follows its close. A
// timeout means the server never closed the connection.
//
// Success of every write proves nothing: on loopback the whole attack fits
// in the socket buffers before a busy server reads its first frame, so the
// close is awaited on the read side.
func h2Attack(t *testing.T, l *lab, n int, continuation bool) error {
	t.Helper()
	conn, err := tls.Dial("tcp", l.addr("https"), &tls.Config{RootCAs: l.roots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/x"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := hb.Bytes()
	closed := make(chan error, 1)
	go func() { // keep reading so the server's writes never block
		for {
			if _, err := fr.ReadFrame(); err != nil {
				closed <- err
				return
			}
		}
	}()
	// A liveness bound for a loaded box, not a speed bound.
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if err := h2Flood(fr, block, n, continuation); err != nil {
		return err
	}
	return <-closed
}

func h2Flood(fr *http2.Framer, block []byte, n int, continuation bool) error {
	if continuation {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:1], EndStream: true}); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := fr.WriteContinuation(1, false, nil); err != nil {
				return err
			}
		}
		return fr.WriteContinuation(1, true, block[1:])
	}
	for i := 0; i < n; i++ {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			return err
		}
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			return err
		}
	}
	return nil
}

// closedByServer reports whether err, from h2Attack, says the server
// closed the connection (and not that the client gave up waiting).
func closedByServer(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestHTTP2RapidResetClosesConnection(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Listeners[0].H2MaxResetsPerSecond = 50
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	if err := h2Attack(t, l, 5000, false); !closedByServer(err) {
		t.Fatalf("connection survived 5000 rapid resets: %v", err)
	}
	eventually(t, 30*time.Second, "the abuse counter", func() bool {
		return testutil.ToFloat64(l.p.metrics.listener.H2Abuse.WithLabelValues("resets")) == 1
	})
	// Normal clients are unaffected.
	if code, _, _ := get(t, l.h2(), l.url("https", "/x")); code != 200 {
		t.Fatalf("after the attack: %d", code)
	}
}

func TestHTTP2ResetsUnderTheLimitAreFine(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	// 20 resets is well under the default budget of 200 per second.
	conn, err := tls.Dial("tcp", l.addr("https"), &tls.Config{RootCAs: l.roots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cc, err := (&http2.Transport{}).NewClientConn(conn)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest("GET", "https://localhost/x", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // before reading: the client resets the stream
	}
	req, _ := http.NewRequest("GET", "https://localhost/x", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatalf("connection closed after 20 resets: %v", err)
	}
	resp.Body.Close()
	if n := testutil.ToFloat64(l.p.metrics.listener.H2Abuse.WithLabelValues("resets")); n != 0 {
		t.Fatalf("abuse counted: %v", n)
	}
}

func TestHTTP2ContinuationFloodClosesConnection(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", nil)
	c := l.config(up.Addr())
	c.Routes = []snapshot.Route{getRoute("r", "/x", "app")}
	l.apply(c)
	if err := h2Attack(t, l, 10000, true); !closedByServer(err) {
		t.Fatalf("connection survived a flood of 10000 CONTINUATION frames: %v", err)
	}
	eventually(t, 30*time.Second, "the abuse counter", func() bool {
		return testutil.ToFloat64(l.p.metrics.listener.H2Abuse.WithLabelValues("continuation")) == 1
	})
}
