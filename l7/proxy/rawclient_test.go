package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/quicvarint"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Raw clients send exactly the bytes or header fields a test gives, with
// none of the checks a real client library makes, and report the status
// the server answered (0 when it reset the stream or closed instead).

// field is one header field as a client sends it (pseudo-fields included).
type field struct{ name, value string }

// rawH1 sends one request head on a new connection and reads the status.
func rawH1(t testing.TB, nc net.Conn, head string) int {
	t.Helper()
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, head); err != nil {
		t.Fatalf("write request: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// dialTLS connects to a TLS listener of the lab, offering only proto.
func (l *lab) dialTLS(proto string) net.Conn {
	l.t.Helper()
	c, err := tls.Dial("tcp", l.addr("https"), &tls.Config{RootCAs: l.roots, ServerName: "localhost", NextProtos: []string{proto}})
	if err != nil {
		l.t.Fatalf("dial %s: %v", proto, err)
	}
	return c
}

// rawH2 opens an HTTP/2 connection on nc (TLS with ALPN h2, or a pipe to
// a server speaking prior knowledge), sends one HEADERS frame with the
// fields and END_STREAM, and returns the status of the answer; 0 when the
// stream was reset or the connection went away.
func rawH2(nc net.Conn, fields []field) (int, error) {
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		return 0, err
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range fields {
		_ = enc.WriteField(hpack.HeaderField{Name: f.name, Value: f.value})
	}
	errc := make(chan error, 1)
	go func() { // a pipe blocks each write until the other side reads
		if err := fr.WriteSettings(); err != nil {
			errc <- err
			return
		}
		errc <- fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
	}()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return 0, err
		}
		switch f := f.(type) { // the server's SETTINGS go unacknowledged: one request needs none
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return strconv.Atoi(f.PseudoValue("status"))
			}
		case *http2.RSTStreamFrame:
			return 0, nil
		case *http2.GoAwayFrame:
			return 0, nil
		}
	}
}

// h3Raw is a QUIC connection speaking just enough HTTP/3 to send chosen
// header fields: a control stream with empty SETTINGS, then one request
// stream per request.
type h3Raw struct {
	addr string
	tls  *tls.Config
	conn *quic.Conn
}

func (h *h3Raw) dial() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := quic.DialAddr(ctx, h.addr, h.tls, &quic.Config{})
	if err != nil {
		return err
	}
	ctrl, err := c.OpenUniStream()
	if err != nil {
		return err
	}
	if _, err := ctrl.Write([]byte{0x00, 0x04, 0x00}); err != nil { // control stream, SETTINGS{}
		return err
	}
	h.conn = c
	return nil
}

// do sends one request and returns its status: 0 when the stream was
// reset; an error when the connection failed (the next call redials).
func (h *h3Raw) do(fields []field) (int, error) {
	if h.conn == nil || h.conn.Context().Err() != nil {
		if err := h.dial(); err != nil {
			return 0, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	str, err := h.conn.OpenStreamSync(ctx)
	if err != nil {
		h.conn = nil
		return 0, err
	}
	_ = str.SetDeadline(time.Now().Add(10 * time.Second))
	var block bytes.Buffer
	enc := qpack.NewEncoder(&block)
	for _, f := range fields {
		_ = enc.WriteField(qpack.HeaderField{Name: f.name, Value: f.value})
	}
	frame := quicvarint.Append(nil, 0x01)
	frame = quicvarint.Append(frame, uint64(block.Len()))
	frame = append(frame, block.Bytes()...)
	if _, err := str.Write(frame); err != nil {
		return 0, nil
	}
	_ = str.Close()
	resp, err := io.ReadAll(str)
	var se *quic.StreamError
	if errors.As(err, &se) {
		return 0, nil
	}
	if err != nil {
		h.conn = nil
		return 0, err
	}
	return h3Status(resp)
}

// h3Status decodes :status from the first (HEADERS) frame of a response.
func h3Status(resp []byte) (int, error) {
	r := bytes.NewReader(resp)
	typ, err := quicvarint.Read(r)
	if err != nil {
		return 0, err
	}
	n, err := quicvarint.Read(r)
	if err != nil || typ != 0x01 || n > uint64(r.Len()) {
		return 0, errors.New("response does not start with a HEADERS frame")
	}
	block := resp[len(resp)-r.Len():][:n]
	next := qpack.NewDecoder().Decode(block)
	for {
		f, err := next()
		if err != nil {
			return 0, err
		}
		if f.Name == ":status" {
			return strconv.Atoi(f.Value)
		}
	}
}
