package h2

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Conformance cases written from RFC 9113 §4–§8 and RFC 7541 (HPACK), each
// driven by a raw Framer client. h2spec's run is in the README.

// want is what a case expects from the server.
type want struct {
	goaway http2.ErrCode // connection error with this code
	rst    uint32        // or RST_STREAM on this stream...
	code   http2.ErrCode // ...with this code
	status string        // or a response with this status on stream 1
}

func connErr(code http2.ErrCode) want              { return want{goaway: code} }
func streamErr(id uint32, code http2.ErrCode) want { return want{rst: id, code: code} }

type conformanceCase struct {
	name string
	send func(rc *rawClient)
	want want
}

// hangHandler holds streams open (until the client goes) so state cases
// can act on an open stream.
func hangHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hang" {
		<-r.Context().Done()
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	io.WriteString(w, "ok")
}

func headersParam(rc *rawClient, id uint32, end bool, kv ...string) http2.HeadersFrameParam {
	return http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.block(kv...), EndStream: end, EndHeaders: true}
}

var base = []string{":method", "GET", ":scheme", "https", ":authority", "a.test", ":path", "/"}

func with(kv ...string) []string { return append(append([]string(nil), base...), kv...) }

func without(name string) []string {
	var out []string
	for i := 0; i < len(base); i += 2 {
		if base[i] != name {
			out = append(out, base[i], base[i+1])
		}
	}
	return out
}

func replace(name, value string) []string {
	out := append([]string(nil), base...)
	for i := 0; i < len(out); i += 2 {
		if out[i] == name {
			out[i+1] = value
		}
	}
	return out
}

func conformanceCases() []conformanceCase {
	post := []string{":method", "POST", ":scheme", "https", ":authority", "a.test", ":path", "/"}
	hang := replace(":path", "/hang")
	return []conformanceCase{
		// §4.1, §4.2 frame format and size
		{"4.2 DATA over SETTINGS_MAX_FRAME_SIZE", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, post...)))
			must(rc.t, rc.fr.WriteData(1, true, make([]byte, 16385)))
		}, connErr(http2.ErrCodeFrameSize)},
		{"4.2 PING of 7 bytes", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FramePing, 0, 0, make([]byte, 7)))
		}, connErr(http2.ErrCodeFrameSize)},
		{"4.1 unknown frame type is ignored", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(0x7f, 0xff, 1, []byte("whatever")))
			rc.get(1, true)
		}, want{status: "200"}},
		{"4.3 HPACK invalid index", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0x7f}, EndStream: true, EndHeaders: true}))
		}, connErr(http2.ErrCodeCompression)},
		{"4.3 HPACK table size update over the setting", func(rc *rawClient) {
			frag := append([]byte{0x3f, 0xe2, 0x1f}, rc.block(base...)...) // size update to 4097
			must(rc.t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag, EndStream: true, EndHeaders: true}))
		}, connErr(http2.ErrCodeCompression)},
		{"4.3 HPACK index 0", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x80}, EndStream: true, EndHeaders: true}))
		}, connErr(http2.ErrCodeCompression)},

		// §5.1 stream states
		{"5.1 DATA on an idle stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteData(1, true, []byte("x")))
		}, connErr(http2.ErrCodeProtocol)},
		{"5.1 RST_STREAM on an idle stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRSTStream(1, http2.ErrCodeCancel))
		}, connErr(http2.ErrCodeProtocol)},
		{"5.1 WINDOW_UPDATE on an idle stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteWindowUpdate(1, 100))
		}, connErr(http2.ErrCodeProtocol)},
		{"5.1 DATA on a half-closed (remote) stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, hang...)))
			must(rc.t, rc.fr.WriteData(1, true, []byte("x")))
		}, streamErr(1, http2.ErrCodeStreamClosed)},
		{"5.1 HEADERS on a half-closed (remote) stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, hang...)))
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, "x-trailer", "1")))
		}, streamErr(1, http2.ErrCodeStreamClosed)},
		{"5.1 DATA after RST_STREAM", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, append(hang[:6:6], ":path", "/hang")...)))
			must(rc.t, rc.fr.WriteRSTStream(1, http2.ErrCodeCancel))
			must(rc.t, rc.fr.WriteData(1, true, []byte("x")))
		}, streamErr(1, http2.ErrCodeStreamClosed)},
		{"5.1.1 HEADERS on an even stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 2, true, base...)))
		}, connErr(http2.ErrCodeProtocol)},
		{"5.1.1 HEADERS with a lower stream id", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 5, true, base...)))
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 3, true, base...)))
		}, connErr(http2.ErrCodeProtocol)},
		{"5.3 HEADERS depending on itself", func(rc *rawClient) {
			p := headersParam(rc, 1, true, base...)
			p.Priority = http2.PriorityParam{StreamDep: 1, Weight: 10}
			must(rc.t, rc.fr.WriteHeaders(p))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"5.3 PRIORITY depending on itself", func(rc *rawClient) {
			must(rc.t, rc.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1}))
		}, streamErr(1, http2.ErrCodeProtocol)},

		// §6.2, §6.10 header blocks
		{"6.10 CONTINUATION without HEADERS", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteContinuation(1, true, rc.block(base...)))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.10 DATA inside a header block", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block(base...)}))
			must(rc.t, rc.fr.WriteData(1, true, []byte("x")))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.10 header block split over CONTINUATION", func(rc *rawClient) {
			b := rc.block(with("x-long", strings.Repeat("v", 40000))...)
			must(rc.t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:16000], EndStream: true}))
			must(rc.t, rc.fr.WriteContinuation(1, false, b[16000:32000]))
			must(rc.t, rc.fr.WriteContinuation(1, true, b[32000:]))
		}, want{status: "200"}},
		{"6.2 HEADERS with a pad length past the payload", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersPadded|http2.FlagHeadersEndHeaders, 1, []byte{200, 0x82}))
		}, connErr(http2.ErrCodeProtocol)},

		// §6.5 SETTINGS
		{"6.5 SETTINGS ACK with a payload", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FrameSettings, http2.FlagSettingsAck, 0, make([]byte, 6)))
		}, connErr(http2.ErrCodeFrameSize)},
		{"6.5 SETTINGS on a stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FrameSettings, 0, 1, nil))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.5 SETTINGS of 5 bytes", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FrameSettings, 0, 0, make([]byte, 5)))
		}, connErr(http2.ErrCodeFrameSize)},
		{"6.5.2 ENABLE_PUSH 2", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.5.2 INITIAL_WINDOW_SIZE over 2^31-1", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31}))
		}, connErr(http2.ErrCodeFlowControl)},
		{"6.5.2 MAX_FRAME_SIZE under 16384", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16383}))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.5.3 repeated settings are applied in order", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100},
				http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535}))
			rc.until("SETTINGS ACK", func(f http2.Frame) bool { sf, ok := f.(*http2.SettingsFrame); return ok && sf.IsAck() })
			rc.get(1, true)
		}, want{status: "200"}},
		{"6.5.3 a SETTINGS ACK nothing waits for", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteSettingsAck())
		}, connErr(http2.ErrCodeProtocol)},

		// §6.7 PING, §6.8 GOAWAY
		{"6.7 PING on a stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FramePing, 0, 1, make([]byte, 8)))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.8 GOAWAY from the client: the server answers GOAWAY", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteGoAway(0, http2.ErrCodeNo, nil))
		}, connErr(http2.ErrCodeNo)},

		// §6.9 flow control
		{"6.9 WINDOW_UPDATE of 0 on the connection", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 0, 0}))
		}, connErr(http2.ErrCodeProtocol)},
		{"6.9 WINDOW_UPDATE of 0 on a stream", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, hang...)))
			must(rc.t, rc.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 0}))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"6.9.1 connection window over 2^31-1", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteWindowUpdate(0, 1<<31-1))
		}, connErr(http2.ErrCodeFlowControl)},
		{"6.9.1 stream window over 2^31-1", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, hang...)))
			must(rc.t, rc.fr.WriteWindowUpdate(1, 1<<31-1))
		}, streamErr(1, http2.ErrCodeFlowControl)},
		{"6.9.2 INITIAL_WINDOW_SIZE pushing an open stream over 2^31-1", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, hang...)))
			must(rc.t, rc.fr.WriteWindowUpdate(1, 1<<31-1-65535))
			must(rc.t, rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536}))
		}, connErr(http2.ErrCodeFlowControl)},

		// §8.1.1 content length
		{"8.1.1 DATA under content-length", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, append(post, "content-length", "4")...)))
			must(rc.t, rc.fr.WriteData(1, true, []byte("abc")))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.1.1 DATA over content-length", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, append(post, "content-length", "2")...)))
			must(rc.t, rc.fr.WriteData(1, false, []byte("ab")))
			must(rc.t, rc.fr.WriteData(1, true, []byte("c")))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.1.1 content-length on a stream ended by its HEADERS", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, append(post, "content-length", "2")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.1.1 content-length not a number", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, append(post, "content-length", "+2")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.1.1 content-length matching the DATA", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, append(post, "content-length", "3")...)))
			must(rc.t, rc.fr.WriteData(1, false, []byte("ab")))
			must(rc.t, rc.fr.WriteData(1, true, []byte("c")))
		}, want{status: "200"}},
		{"8.1 trailers without END_STREAM", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, post...)))
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, "x-t", "1")))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.1 trailers with a pseudo-header", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, false, post...)))
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, ":path", "/")))
		}, streamErr(1, http2.ErrCodeProtocol)},

		// §8.2 fields
		{"8.2.1 upper-case field name", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("X-Upper", "1")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.2.1 field value with a NUL", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("x-v", "a\x00b")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.2.2 connection-specific field: 400 like x/net", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("connection", "keep-alive")...)))
		}, want{status: "400"}},
		{"8.2.2 TE other than trailers: 400 like x/net", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("te", "gzip")...)))
		}, want{status: "400"}},
		{"8.2.2 TE: trailers", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("te", "trailers")...)))
		}, want{status: "200"}},

		// §8.3 pseudo-header fields
		{"8.3 unknown pseudo-header", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with(":foo", "1")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3 response pseudo-header in a request", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with(":status", "200")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3 pseudo-header after a regular field", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, append(without(":path"), "x-a", "1", ":path", "/")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 no :method", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, without(":method")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 no :scheme", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, without(":scheme")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 no :path", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, without(":path")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 empty :path", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, replace(":path", "")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 :path not starting with /", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, replace(":path", "x")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 duplicate :method", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, append([]string{":method", "GET"}, base...)...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 :scheme neither http nor https", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, replace(":scheme", "ftp")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 :authority with userinfo", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, replace(":authority", "u@a.test")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 host differing from :authority", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("host", "b.test")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.3.1 :protocol (extended CONNECT not offered)", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with(":protocol", "websocket")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.5 CONNECT with :path", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, replace(":method", "CONNECT")...)))
		}, streamErr(1, http2.ErrCodeProtocol)},
		{"8.5 CONNECT with :authority only", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, ":method", "CONNECT", ":authority", "a.test:443")))
		}, want{status: "200"}},
		{"8.3.1 OPTIONS *", func(rc *rawClient) {
			must(rc.t, rc.fr.WriteHeaders(headersParam(rc, 1, true, append(replace(":path", "*")[:0:0], ":method", "OPTIONS", ":scheme", "https", ":authority", "a", ":path", "*")...)))
		}, want{status: "200"}},
	}
}

func TestConformance(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(hangHandler))
	for _, tc := range conformanceCases() {
		t.Run(tc.name, func(t *testing.T) {
			rc := ts.raw(t)
			rc.handshake()
			tc.send(rc)
			check(t, rc, tc.want)
		})
	}
}

func check(t *testing.T, rc *rawClient, w want) {
	t.Helper()
	switch {
	case w.status != "":
		if got := rc.response(1); got != w.status {
			t.Fatalf("status %s, want %s", got, w.status)
		}
	case w.rst != 0:
		if got := rc.reset(w.rst); got != w.code {
			t.Fatalf("RST_STREAM %v, want %v", got, w.code)
		}
		// the connection goes on
		must(t, rc.fr.WritePing(false, [8]byte{7}))
		rc.until("PING ACK", func(f http2.Frame) bool {
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v after a stream error", ga.ErrCode)
			}
			p, ok := f.(*http2.PingFrame)
			return ok && p.IsAck() && p.Data == [8]byte{7}
		})
	default:
		if ga := rc.goAway(); ga.ErrCode != w.goaway {
			t.Fatalf("GOAWAY %v, want %v", ga.ErrCode, w.goaway)
		}
		if !rc.closed() {
			t.Fatal("connection open after GOAWAY")
		}
	}
}

// TestPingAck: a PING is answered with its data (§6.7).
func TestPingAck(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(hangHandler))
	rc := ts.raw(t)
	rc.handshake()
	must(t, rc.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}))
	rc.until("PING ACK", func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	})
}

// TestMaxConcurrentStreams: a stream over SETTINGS_MAX_CONCURRENT_STREAMS
// is refused with REFUSED_STREAM (§5.1.2) and the others go on.
func TestMaxConcurrentStreams(t *testing.T) {
	// the reset budget is raised: on a slow box many streams may be refused
	// before stream 1's handler has returned
	ts := serve(t, &Server{MaxConcurrentStreams: 2, MaxResetsPerSecond: 1 << 20}, http.HandlerFunc(hangHandler))
	rc := ts.raw(t)
	rc.handshake()
	hang := replace(":path", "/hang")
	must(t, rc.fr.WriteHeaders(headersParam(rc, 1, true, hang...)))
	must(t, rc.fr.WriteHeaders(headersParam(rc, 3, true, hang...)))
	must(t, rc.fr.WriteHeaders(headersParam(rc, 5, true, base...)))
	if code := rc.reset(5); code != http2.ErrCodeRefusedStream {
		t.Fatalf("stream 5: %v", code)
	}
	must(t, rc.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	// stream 1's handler returns once reset; then a new stream fits
	for id := uint32(7); ; id += 2 {
		must(t, rc.fr.WriteHeaders(headersParam(rc, id, true, base...)))
		f := rc.until("stream answer", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				return f.StreamID == id
			case *http2.MetaHeadersFrame:
				return f.StreamID == id
			}
			return false
		})
		if _, ok := f.(*http2.MetaHeadersFrame); ok {
			break
		}
		if id > 2001 {
			t.Fatal("streams still refused after a reset")
		}
	}
}

// TestFlowControlSendSide: with a client window of 0 the response's HEADERS
// go out, its DATA waits for WINDOW_UPDATE, and a smaller
// SETTINGS_INITIAL_WINDOW_SIZE applies to open streams (§6.9.2).
func TestFlowControlSendSide(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 100))
	}))
	rc := ts.raw(t)
	rc.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.get(1, true)
	rc.response(1)
	must(t, rc.fr.WriteWindowUpdate(1, 30))
	got := 0
	for got < 100 {
		f := rc.until("DATA", func(f http2.Frame) bool { _, ok := f.(*http2.DataFrame); return ok }).(*http2.DataFrame)
		if got+len(f.Data()) > 30 && got < 30 && got+len(f.Data()) != 30 {
			t.Fatalf("DATA of %d bytes past a 30-byte window (had %d)", len(f.Data()), got)
		}
		got += len(f.Data())
		if got == 30 {
			must(t, rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}))
			// the stream's window grows by 100: 70 more fit
		}
		if f.StreamEnded() {
			break
		}
	}
	if got != 100 {
		t.Fatalf("got %d bytes", got)
	}
}

// TestHeaderListTooLarge: a header list over MaxHeaderListSize is answered
// 431 (as x/net does) and told to Rejected; the connection goes on.
func TestHeaderListTooLarge(t *testing.T) {
	ts := serve(t, &Server{MaxHeaderListSize: 1024}, http.HandlerFunc(hangHandler))
	rc := ts.raw(t)
	rc.handshake()
	must(t, rc.fr.WriteHeaders(headersParam(rc, 1, true, with("x-big", strings.Repeat("b", 1500))...)))
	if st := rc.response(1); st != "431" {
		t.Fatalf("status %s", st)
	}
	rc.getPath(3, "/", true)
	if st := rc.response(3); st != "200" {
		t.Fatalf("next request: %s", st)
	}
	if r := ts.rejects(); len(r) != 1 || r[0] != 431 {
		t.Fatalf("rejected %v", r)
	}
}

// TestRequestFields: what the handler sees of a request (x/net's rules:
// cookies joined, Host from :authority, Trailer declared, TLS nil on http).
func TestRequestFields(t *testing.T) {
	got := make(chan *http.Request, 1)
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Header.Set("X-Body", string(b))
		got <- r
	}))
	rc := ts.raw(t)
	rc.handshake()
	must(t, rc.fr.WriteHeaders(headersParam(rc, 1, false, ":method", "POST", ":scheme", "http", ":authority", "h.test:8080",
		":path", "/p?q=1", "cookie", "a=1", "cookie", "b=2", "trailer", "x-sum", "content-length", "2")))
	must(t, rc.fr.WriteData(1, false, []byte("hi")))
	must(t, rc.fr.WriteHeaders(headersParam(rc, 1, true, "x-sum", "7")))
	r := <-got
	if r.Host != "h.test:8080" || r.URL.Path != "/p" || r.URL.RawQuery != "q=1" || r.RequestURI != "/p?q=1" ||
		r.Header.Get("Cookie") != "a=1; b=2" || r.ContentLength != 2 || r.Header.Get("X-Body") != "hi" ||
		r.Trailer.Get("X-Sum") != "7" || r.TLS != nil || r.Proto != "HTTP/2.0" || r.Method != "POST" {
		t.Fatalf("request %+v", r)
	}
	rc.response(1)
}

var _ = hpack.HeaderField{}
