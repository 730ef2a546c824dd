package h2

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Each abuse bound closes the connection with ENHANCE_YOUR_CALM (when the
// client still reads) and tells Server.Abuse its reason.

func wantAbuse(t *testing.T, ts *testServer, rc *rawClient, reason string, calm bool) {
	t.Helper()
	if calm {
		if ga := rc.goAway(); ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
			t.Fatalf("GOAWAY %v, want ENHANCE_YOUR_CALM", ga.ErrCode)
		}
	}
	if !rc.closed() {
		t.Fatal("connection still open")
	}
	deadline := time.Now().Add(liveness)
	for !slices.Contains(ts.abuses(), reason) {
		if time.Now().After(deadline) {
			t.Fatalf("abuse reasons %v, want %q", ts.abuses(), reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRapidReset (CVE-2023-44487): HEADERS+RST_STREAM pairs beyond
// MaxResetsPerSecond close the connection, and meanwhile no more handlers
// run at once than MaxConcurrentStreams (a reset stream counts until its
// handler returned), nor more workers exist.
func TestRapidReset(t *testing.T) {
	var running, peak atomic.Int32
	s := &Server{MaxResetsPerSecond: 50, MaxConcurrentStreams: 4}
	ts := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-r.Context().Done()
		time.Sleep(time.Millisecond) // a handler that is slow to notice
		running.Add(-1)
	}))
	rc := ts.raw(t)
	rc.handshake()
	go func() {
		for id := uint32(1); id < 2000; id += 2 {
			if rc.fr.WriteHeaders(headersParam(rc, id, true, base...)) != nil || rc.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
	}()
	wantAbuse(t, ts, rc, "resets", true)
	if p := peak.Load(); p > 4 {
		t.Fatalf("%d handlers ran at once, limit 4", p)
	}
}

// TestWorkersBounded: a connection's workers never outnumber its stream
// limit, however many streams it serves.
func TestWorkersBounded(t *testing.T) {
	s := &Server{MaxConcurrentStreams: 3}
	release := make(chan struct{})
	ts := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-release
		}
	}))
	rc := ts.raw(t)
	rc.handshake()
	id := uint32(1)
	for range 3 {
		rc.getPath(id, "/hang", true)
		id += 2
	}
	rc.get(id, true)
	if code := rc.reset(id); code != http2.ErrCodeRefusedStream {
		t.Fatalf("4th stream: %v", code)
	}
	close(release)
	// the three must be answered (and so forgotten) before more streams
	// fit under the limit
	done := map[uint32]bool{}
	rc.until("the three held streams' responses", func(f http2.Frame) bool {
		if mh, ok := f.(*http2.MetaHeadersFrame); ok && mh.StreamEnded() {
			done[mh.StreamID] = true
		}
		return done[1] && done[3] && done[5]
	})
	for range 50 {
		id += 2
		rc.get(id, true)
		rc.response(id)
	}
	s.conns.Each(func(c *conn) {
		c.mu.Lock()
		w := c.workers
		c.mu.Unlock()
		if w > 3 {
			t.Errorf("%d workers, limit 3", w)
		}
	})
}

// TestContinuationFlood (CVE-2024-27316 family): endless CONTINUATION
// frames, empty or not, close the connection.
func TestContinuationFlood(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		ts := serve(t, &Server{MaxContinuations: 32, MaxControlPerSecond: 1 << 20}, http.HandlerFunc(hangHandler))
		rc := ts.raw(t)
		rc.handshake()
		must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block(base...)}))
		go func() {
			for range 1000 {
				if rc.fr.WriteContinuation(1, false, []byte{0x40, 0x01, 'a', 0x01, 'b'}[:0]) != nil {
					return
				}
			}
		}()
		wantAbuse(t, ts, rc, "continuation", true)
	})
	t.Run("empty frames rate", func(t *testing.T) {
		ts := serve(t, &Server{MaxControlPerSecond: 10, MaxContinuations: 1 << 20}, http.HandlerFunc(hangHandler))
		rc := ts.raw(t)
		rc.handshake()
		must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block(base...)}))
		go func() {
			for range 1000 {
				if rc.fr.WriteContinuation(1, false, nil) != nil {
					return
				}
			}
		}()
		wantAbuse(t, ts, rc, "continuation", true)
	})
	t.Run("bytes", func(t *testing.T) {
		ts := serve(t, &Server{MaxHeaderListSize: 4096, MaxContinuations: 1 << 20}, http.HandlerFunc(hangHandler))
		rc := ts.raw(t)
		rc.handshake()
		must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block(base...)}))
		lit := rc.block("x-a", strings.Repeat("v", 1000))
		go func() {
			for range 100 {
				if rc.fr.WriteContinuation(1, false, lit) != nil {
					return
				}
			}
		}()
		wantAbuse(t, ts, rc, "header_block", true)
	})
	t.Run("slow block", func(t *testing.T) {
		ts := serve(t, &Server{ReadHeaderTimeout: 100 * time.Millisecond}, http.HandlerFunc(hangHandler))
		rc := ts.raw(t)
		rc.handshake()
		must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: rc.block(base...)}))
		// never ends the block
		if !rc.closed() {
			t.Fatal("an unfinished header block kept the connection")
		}
	})
}

// TestHPACKBomb: one large field in the dynamic table referenced by 1-byte
// indexes decodes to far more than the header list limit: answered 431
// without keeping the fields, and the connection goes on.
func TestHPACKBomb(t *testing.T) {
	ts := serve(t, &Server{MaxHeaderListSize: 16 << 10}, http.HandlerFunc(hangHandler))
	rc := ts.raw(t)
	rc.handshake()
	rc.eb.Reset()
	for i := 0; i < len(base); i += 2 {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: base[i], Value: base[i+1]})
	}
	_ = rc.enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 3000)})
	block := append([]byte(nil), rc.eb.Bytes()...)
	for range 5000 {
		block = append(block, 0x80|62) // dynamic table index 62: x-bomb (5000 x 3 KB decoded)
	}
	must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true}))
	if st := rc.response(1); st != "431" {
		t.Fatalf("status %s", st)
	}
	rc.getPath(3, "/", true)
	if st := rc.response(3); st != "200" {
		t.Fatalf("after the bomb: %s", st)
	}
}

func TestControlFloods(t *testing.T) {
	cases := []struct {
		reason string
		send   func(rc *rawClient) error
	}{
		{"settings", func(rc *rawClient) error { return rc.fr.WriteSettings() }},
		{"ping", func(rc *rawClient) error { return rc.fr.WritePing(false, [8]byte{}) }},
		{"priority", func(rc *rawClient) error {
			return rc.fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 1})
		}},
		{"window_update", func(rc *rawClient) error { return rc.fr.WriteWindowUpdate(0, 1) }},
		{"empty_frames", func(rc *rawClient) error { return rc.fr.WriteData(1, false, nil) }},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			ts := serve(t, &Server{MaxControlPerSecond: 20}, http.HandlerFunc(hangHandler))
			rc := ts.raw(t)
			rc.handshake()
			rc.getPath(1, "/hang", false)
			go func() {
				for range 5000 {
					if tc.send(rc) != nil {
						return
					}
				}
			}()
			wantAbuse(t, ts, rc, tc.reason, true)
		})
	}
}

// TestControlQueue: control replies piling up behind a response the client
// does not read close the connection (x/net's maxQueuedControlFrames).
func TestControlQueue(t *testing.T) {
	ts := serve(t, &Server{MaxControlPerSecond: 1 << 30}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 512 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	rc := ts.raw(t)
	rc.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	must(t, rc.fr.WriteWindowUpdate(0, 1<<31-1-65535))
	rc.get(1, true)
	// never read: the handler's write blocks, then PING acks queue up.
	// PINGs go on until the connection ends: those sent while the
	// handler's writes still fit in the socket buffers are answered.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for rc.fr.WritePing(false, [8]byte{}) == nil {
		}
	}()
	deadline := time.Now().Add(liveness)
	for !slices.Contains(ts.abuses(), "control_queue") {
		if time.Now().After(deadline) {
			t.Fatalf("abuse %v", ts.abuses())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = rc.nc.Close()
	wg.Wait()
}

// TestZeroWindowStall: a client that opens no window for a response stalls
// it; past StallTimeout the connection closes.
func TestZeroWindowStall(t *testing.T) {
	ts := serve(t, &Server{StallTimeout: 100 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(make([]byte, 100))
	}))
	rc := ts.raw(t)
	rc.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.get(1, true)
	wantAbuse(t, ts, rc, "zero_window", false)
}

// TestSlowPreface: a connection that sends no preface within
// ReadHeaderTimeout is closed.
func TestSlowPreface(t *testing.T) {
	ts := serve(t, &Server{ReadHeaderTimeout: 50 * time.Millisecond}, http.HandlerFunc(hangHandler))
	rc := ts.raw(t)
	if !rc.closed() {
		t.Fatal("still open")
	}
}

// TestSmallWindowUpdatesAnsweringData: small WINDOW_UPDATEs that give back
// DATA the server sent are not abuse, however many.
func TestSmallWindowUpdatesAnsweringData(t *testing.T) {
	ts := serve(t, &Server{MaxControlPerSecond: 5}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for range 200 {
			w.Write([]byte("chunk"))
			w.(http.Flusher).Flush()
		}
	}))
	rc := ts.raw(t)
	rc.handshake()
	rc.get(1, true)
	for {
		f := rc.until("DATA", func(f http2.Frame) bool {
			if ga, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v", ga.ErrCode)
			}
			_, ok := f.(*http2.DataFrame)
			return ok
		}).(*http2.DataFrame)
		if len(f.Data()) > 0 {
			must(t, rc.fr.WriteWindowUpdate(0, uint32(len(f.Data()))))
			must(t, rc.fr.WriteWindowUpdate(1, uint32(len(f.Data()))))
		}
		if f.StreamEnded() {
			break
		}
	}
	if a := ts.abuses(); len(a) != 0 {
		t.Fatalf("abuse %v", a)
	}
}

// TestStreamErrorFlood: streams the client makes the server reset, here
// refused over the stream limit, are bounded like its own resets.
func TestStreamErrorFlood(t *testing.T) {
	ts := serve(t, &Server{MaxResetsPerSecond: 20, MaxConcurrentStreams: 1}, http.HandlerFunc(hangHandler))
	rc := ts.raw(t)
	rc.handshake()
	rc.getPath(1, "/hang", true)
	go func() {
		for id := uint32(3); id < 4000; id += 2 {
			if rc.fr.WriteHeaders(headersParam(rc, id, true, base...)) != nil {
				return
			}
		}
	}()
	wantAbuse(t, ts, rc, "stream_errors", true)
}
