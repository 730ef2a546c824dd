package h2

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// liveness bounds every wait in these tests; nothing asserts speed.
const liveness = 20 * time.Second

type testServer struct {
	s    *Server
	ln   net.Listener
	addr string

	mu     sync.Mutex
	abuse  []string
	reject []int
}

func (ts *testServer) abuses() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.abuse...)
}

func (ts *testServer) rejects() []int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]int(nil), ts.reject...)
}

// serve starts s (with h as its handler) on a loopback port.
func serve(t testing.TB, s *Server, h http.Handler) *testServer {
	t.Helper()
	return serveWrapped(t, s, h, nil)
}

// serveWrapped is serve with every accepted connection passed through wrap
// (when not nil) before the server gets it.
func serveWrapped(t testing.TB, s *Server, h http.Handler, wrap func(net.Conn) net.Conn) *testServer {
	t.Helper()
	if s == nil {
		s = &Server{}
	}
	s.Handler = h
	ts := &testServer{s: s}
	s.Abuse = func(remote, reason string) {
		ts.mu.Lock()
		ts.abuse = append(ts.abuse, reason)
		ts.mu.Unlock()
	}
	s.Rejected = func(remote string, status int, reason string) {
		ts.mu.Lock()
		ts.reject = append(ts.reject, status)
		ts.mu.Unlock()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.ln, ts.addr = ln, ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if wrap != nil {
				c = wrap(c)
			}
			go s.ServeConn(c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return ts
}

// client is an x/net HTTP/2 client speaking cleartext to ts.
func (ts *testServer) client() *http.Client {
	tr := &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}
	return &http.Client{Transport: tr, Timeout: liveness}
}

func (ts *testServer) url(path string) string { return "http://" + ts.addr + path }

// rawClient speaks frames to the server, for conformance and abuse tests.
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	eb  bytes.Buffer
	dec *hpack.Decoder
}

func (ts *testServer) raw(t testing.TB) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", ts.addr, liveness)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(liveness))
	rc := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc), dec: hpack.NewDecoder(4096, nil)}
	rc.enc = hpack.NewEncoder(&rc.eb)
	rc.fr.ReadMetaHeaders = rc.dec
	return rc
}

// handshake sends the preface and SETTINGS and reads until the server's
// SETTINGS were acknowledged.
func (rc *rawClient) handshake(settings ...http2.Setting) {
	rc.t.Helper()
	if _, err := rc.nc.Write([]byte(http2.ClientPreface)); err != nil {
		rc.t.Fatal(err)
	}
	must(rc.t, rc.fr.WriteSettings(settings...))
	gotSettings := false
	for !gotSettings {
		f := rc.read()
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			gotSettings = true
			must(rc.t, rc.fr.WriteSettingsAck())
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (rc *rawClient) read() http2.Frame {
	rc.t.Helper()
	f, err := rc.fr.ReadFrame()
	if err != nil {
		rc.t.Fatalf("read frame: %v", err)
	}
	return f
}

// block encodes header fields (pairs) as an HPACK block.
func (rc *rawClient) block(kv ...string) []byte {
	rc.eb.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), rc.eb.Bytes()...)
}

// get sends a GET for / on stream id with extra fields.
func (rc *rawClient) get(id uint32, end bool, extra ...string) { rc.getPath(id, "/", end, extra...) }

func (rc *rawClient) getPath(id uint32, path string, end bool, extra ...string) {
	rc.t.Helper()
	kv := append([]string{":method", "GET", ":scheme", "http", ":authority", "example.test", ":path", path}, extra...)
	must(rc.t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.block(kv...),
		EndStream: end, EndHeaders: true}))
}

// until reads frames until match returns true, failing on connection end.
func (rc *rawClient) until(what string, match func(http2.Frame) bool) http2.Frame {
	rc.t.Helper()
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			rc.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return f
		}
	}
}

// goAway reads until GOAWAY and returns it.
func (rc *rawClient) goAway() *http2.GoAwayFrame {
	rc.t.Helper()
	return rc.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
}

// reset reads until RST_STREAM on id and returns its code.
func (rc *rawClient) reset(id uint32) http2.ErrCode {
	rc.t.Helper()
	f := rc.until("RST_STREAM", func(f http2.Frame) bool {
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			rc.t.Fatalf("GOAWAY %v while waiting for RST_STREAM on %d", ga.ErrCode, id)
		}
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id
	})
	return f.(*http2.RSTStreamFrame).ErrCode
}

// response reads until the HEADERS of stream id and returns its status.
func (rc *rawClient) response(id uint32) string {
	rc.t.Helper()
	f := rc.until("response HEADERS", func(f http2.Frame) bool {
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			rc.t.Fatalf("GOAWAY %v while waiting for a response on %d", ga.ErrCode, id)
		}
		if r, ok := f.(*http2.RSTStreamFrame); ok && r.StreamID == id {
			rc.t.Fatalf("RST_STREAM %v while waiting for a response on %d", r.ErrCode, id)
		}
		mh, ok := f.(*http2.MetaHeadersFrame)
		return ok && mh.StreamID == id && mh.PseudoValue("status") != "" && mh.PseudoValue("status")[0] != '1'
	})
	return f.(*http2.MetaHeadersFrame).PseudoValue("status")
}

// closed reports whether the server closed the connection within the
// liveness deadline (reading and dropping frames meanwhile).
func (rc *rawClient) closed() bool {
	for {
		_, err := rc.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}
