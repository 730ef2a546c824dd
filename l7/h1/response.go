package h1

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/l7/wire"
)

// response is the connection's http.ResponseWriter, reused per request.
type response struct {
	c           *conn
	req         *http.Request
	hdr         http.Header
	status      int
	wroteHeader bool
	framing     wire.Framing // NoBody, Length, Chunked, or UntilEOF (close-delimited)
	length      int64
	written     int64
	closeAfter  bool
	declared    []string // trailer names announced in the Trailer field
}

// ErrBodyTooLong is returned by Write past the declared Content-Length.
var ErrBodyTooLong = errors.New("h1: wrote more than the declared Content-Length")

func (w *response) reset(r *http.Request) {
	clear(w.hdr)
	*w = response{c: w.c, req: r, hdr: w.hdr}
}

func (w *response) Header() http.Header { return w.hdr }

// SetReadDeadline and SetWriteDeadline serve http.ResponseController.
func (w *response) SetReadDeadline(t time.Time) error  { return w.c.nc.SetReadDeadline(t) }
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("h1: invalid status code " + strconv.Itoa(code))
	}
	if code < 200 && code != 101 {
		w.writeInterim(code)
		return
	}
	w.wroteHeader, w.status = true, code
	h := w.hdr
	w.framing, w.length = wire.UntilEOF, -1
	if cl := h["Content-Length"]; len(cl) > 0 {
		if n, err := wire.ParseContentLength(cl[0]); err == nil {
			w.framing, w.length = wire.Length, n
		} else {
			delete(h, "Content-Length")
		}
	}
	switch {
	case w.req.Method == "HEAD" || code == 204 || code == 304:
		w.framing = wire.NoBody
		if code != 200 || w.req.Method != "HEAD" {
			delete(h, "Content-Length")
		}
	case w.framing == wire.Length:
	case w.req.ProtoMinor == 1:
		w.framing = wire.Chunked
	default:
		w.closeAfter = true
	}
	delete(h, "Transfer-Encoding")
	if t := h["Trailer"]; len(t) > 0 && w.framing == wire.Chunked {
		for _, v := range t {
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					w.declared = append(w.declared, http.CanonicalHeaderKey(name))
				}
			}
		}
	}
	if w.req.Close || w.c.s.shutting.Load() || w.c.bodyTooBigToDrain() {
		w.closeAfter = true
	}
	w.writeHead()
}

func (w *response) writeHead() {
	bw := w.c.bw
	bw.WriteString(statusLine(w.status))
	for k, vv := range w.hdr {
		if strings.HasPrefix(k, http.TrailerPrefix) || k == "Connection" {
			continue
		}
		for _, v := range vv {
			if !safeField(k, v) {
				continue
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if _, ok := w.hdr["Date"]; !ok {
		bw.WriteString("Date: ")
		bw.WriteString(wire.Date())
		bw.WriteString("\r\n")
	}
	if w.framing == wire.Chunked {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	switch {
	case w.closeAfter:
		bw.WriteString("Connection: close\r\n")
	case w.req.ProtoMinor == 0:
		bw.WriteString("Connection: keep-alive\r\n")
	}
	bw.WriteString("\r\n")
}

// writeInterim sends a 1xx response (such as 103 Early Hints) at once.
func (w *response) writeInterim(code int) {
	if w.req.ProtoMinor == 0 {
		return
	}
	bw := w.c.bw
	bw.WriteString(statusLine(code))
	for k, vv := range w.hdr {
		for _, v := range vv {
			if safeField(k, v) {
				bw.WriteString(k + ": " + v + "\r\n")
			}
		}
	}
	bw.WriteString("\r\n")
	_ = bw.Flush()
}

// safeField refuses names and values that would break the framing: a
// handler bug must not become response splitting.
func safeField(k, v string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !wire.IsTokenChar(k[i]) {
			return false
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	bw := w.c.bw
	switch w.framing {
	case wire.NoBody:
		if w.req.Method == "HEAD" {
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	case wire.Length:
		if w.written+int64(len(p)) > w.length {
			n, _ := bw.Write(p[:w.length-w.written])
			w.written += int64(n)
			return n, ErrBodyTooLong
		}
	case wire.Chunked:
		if len(p) == 0 {
			return 0, nil
		}
		var num [16]byte
		bw.Write(strconv.AppendInt(num[:0], int64(len(p)), 16))
		bw.WriteString("\r\n")
		n, err := bw.Write(p)
		bw.WriteString("\r\n")
		w.written += int64(n)
		return n, err
	}
	n, err := bw.Write(p)
	w.written += int64(n)
	return n, err
}

// Hijack hands the connection to the handler (for a protocol upgrade such
// as WebSocket), with what is already buffered in both directions. The
// server no longer reads, writes or closes it.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.wroteHeader {
		return nil, nil, errors.New("h1: hijack after the response head was written")
	}
	c := w.c
	c.watch.stop(c)
	c.hijacked = true
	c.bodyDeadline = false
	c.state.Store(stateClosing)
	return c.nc, bufio.NewReadWriter(c.br, c.bw), nil
}

func (w *response) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	_ = w.c.bw.Flush()
}

// finish ends the response after the handler returned.
func (w *response) finish() {
	if !w.wroteHeader {
		if _, ok := w.hdr["Content-Length"]; !ok && w.req.Method != "HEAD" {
			w.hdr["Content-Length"] = zeroLength
		}
		w.WriteHeader(http.StatusOK)
	}
	bw := w.c.bw
	switch w.framing {
	case wire.Chunked:
		bw.WriteString("0\r\n")
		for k, vv := range w.hdr {
			name, ok := strings.CutPrefix(k, http.TrailerPrefix)
			if !ok {
				for _, d := range w.declared {
					if d == k {
						name, ok = k, true
					}
				}
			}
			if !ok {
				continue
			}
			for _, v := range vv {
				if safeField(name, v) {
					bw.WriteString(name + ": " + v + "\r\n")
				}
			}
		}
		bw.WriteString("\r\n")
	case wire.Length:
		if w.written < w.length {
			w.closeAfter = true // the client sees a short body, then EOF
		}
	}
}

var zeroLength = []string{"0"}

var statusLines = func() map[int]string {
	m := map[int]string{}
	for code := 100; code < 600; code++ {
		if t := http.StatusText(code); t != "" {
			m[code] = "HTTP/1.1 " + strconv.Itoa(code) + " " + t + "\r\n"
		}
	}
	return m
}()

func statusLine(code int) string {
	if s, ok := statusLines[code]; ok {
		return s
	}
	return "HTTP/1.1 " + strconv.Itoa(code) + " \r\n"
}

// writeError answers a request the parser refused, and the connection closes.
func (c *conn) writeError(code int, reason string) {
	body := strconv.Itoa(code) + " " + http.StatusText(code) + ": " + reason + "\n"
	_, _ = c.bw.WriteString(statusLine(code) + "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	_ = c.bw.Flush()
}
