package h2

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// connError ends the connection with GOAWAY(code); reason names the check
// (x/net's countError names where they match) and abuse, when set, is the
// Abuse reason.
type connError struct {
	code   http2.ErrCode
	reason string
	abuse  string
}

func (e connError) Error() string {
	return fmt.Sprintf("h2: connection error %v (%s)", e.code, e.reason)
}

// streamError resets one stream.
type streamError struct {
	id     uint32
	code   http2.ErrCode
	reason string
}

func (e streamError) Error() string {
	return fmt.Sprintf("h2: stream %d error %v (%s)", e.id, e.code, e.reason)
}

var (
	errConnClosed   = errors.New("h2: connection closed")
	errStreamClosed = errors.New("h2: stream closed")
)

// outBuf collects the frames the write framer produces.
type outBuf struct{ b []byte }

func (o *outBuf) Write(p []byte) (int, error) { o.b = append(o.b, p...); return len(p), nil }

// maxBuffered is how much written output a handler may queue while
// another goroutine writes to the socket before it waits.
const maxBuffered = 256 << 10

type conn struct {
	s      *Server
	cfg    settings
	nc     net.Conn
	br     *bufio.Reader // nil only while idleRead waits, or after serve
	src    connSource
	fr     *http2.Framer
	remote string
	tls    *tls.ConnectionState
	ctx    context.Context
	cancel context.CancelFunc

	// read loop only
	dec         *hpack.Decoder
	hb          headerBlock
	canon       map[string]string
	maxClientID uint32
	sawSettings bool
	resets      bucket
	streamErrs  bucket
	pings       bucket
	settingsB   bucket
	priorities  bucket
	empties     bucket
	windows     bucket

	mu       sync.Mutex // guards everything below
	streams  map[uint32]*stream
	flowCond *sync.Cond // send windows changed, output drained, or closing
	out      outBuf
	spare    []byte
	fw       *http2.Framer
	enc      blockEncoder
	flushing bool
	yielding bool // a handler gave way to other goroutines and flushes after them (flushSoonLocked)
	queued   int  // control replies queued since the last write
	werr     error
	closed   bool // no more writes; handlers fail

	sendWindow     int64 // connection send window
	peerInitWindow int32
	peerMaxFrame   uint32
	recvWindow     int32 // connection receive window left to the peer
	recvUnacked    int32 // consumed connection bytes not yet given back
	dataSent       int   // DATA frames sent not yet answered by a small WINDOW_UPDATE (capped)
	settingsSent   int   // our SETTINGS not yet acknowledged

	goaway        bool        // GOAWAY sent: no new streams
	goawayPending bool        // shutdown asked before the first request
	draining      atomic.Bool // read deadline set to let the client finish
	busy          atomic.Bool // the read loop has whole frames buffered and flushes after them
	idleTimer     *time.Timer
	workers       int
	idleWorkers   int
	work          chan *stream // nil while the connection has no worker
	free          []*stream    // finished streams to reuse; dropped with the last worker
	running       sync.WaitGroup
}

func newConn(s *Server, nc net.Conn) *conn {
	cfg := s.settings()
	c := &conn{s: s, cfg: cfg, nc: nc, remote: nc.RemoteAddr().String(),
		streams: map[uint32]*stream{}, peerInitWindow: 65535, peerMaxFrame: 16384,
		sendWindow: 65535, recvWindow: 65535,
		resets: newBucket(cfg.resets), streamErrs: newBucket(cfg.resets), pings: newBucket(cfg.control), settingsB: newBucket(cfg.control),
		priorities: newBucket(cfg.control), empties: newBucket(cfg.control), windows: newBucket(cfg.control)}
	parent := s.BaseContext
	if parent == nil {
		parent = context.Background()
	}
	c.ctx, c.cancel = context.WithCancel(parent)
	c.flowCond = sync.NewCond(&c.mu)
	if tc, ok := nc.(interface{ ConnectionState() tls.ConnectionState }); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	// 4 KiB holds a burst of HEADERS; larger DATA frames are read past it
	// (an idle connection keeps this buffer, as x/net's does).
	c.src.nc = nc
	c.br = readBufs.Get().(*bufio.Reader)
	c.br.Reset(&c.src)
	c.fr = http2.NewFramer(nil, readerOf{c})
	c.fr.SetMaxReadFrameSize(16384)
	c.fw = http2.NewFramer(&c.out, nil)
	c.enc = newBlockEncoder()
	c.dec = hpack.NewDecoder(4096, nil)
	// A string over the header list limit is a 431 (emit sees it), not
	// a decoding error; the block itself is bounded to twice the limit.
	c.dec.SetMaxStringLength(2 * int(cfg.maxHeader))
	c.dec.SetEmitFunc(c.hb.emit)
	return c
}

func (c *conn) serve() {
	err := c.serveFrames()
	c.mu.Lock()
	var ce connError
	if errors.As(err, &ce) {
		if !c.goaway || ce.code != http2.ErrCodeNo {
			c.goaway = true
			_ = c.fw.WriteGoAway(c.maxClientID, ce.code, nil)
		}
		if ce.abuse != "" && c.s.Abuse != nil {
			c.s.Abuse(c.remote, ce.abuse)
		}
	}
	c.flushLocked()
	c.closed = true
	for _, st := range c.streams {
		st.abort(errConnClosed)
	}
	c.flowCond.Broadcast()
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	if c.work != nil {
		close(c.work) // no stream is dispatched now: workers run what is queued, then leave
	}
	c.mu.Unlock()
	c.cancel()
	_ = c.nc.Close()
	c.running.Wait()
	if c.br != nil { // only the read loop used it, and it has ended
		c.br.Reset(nil)
		readBufs.Put(c.br)
		c.br = nil
	}
}

// The read buffer is pooled: an idle connection over TLS waits for its
// next frame with a one-byte read and no buffer (idleRead).
var readBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// idleWaits counts idleRead's waits without a buffer (tests).
var idleWaits atomic.Uint64

// connSource is what the read buffer fills from: first the byte idleRead
// took, then the connection.
type connSource struct {
	nc   net.Conn
	pend [1]byte
	has  bool
}

func (s *connSource) Read(p []byte) (int, error) {
	if s.has {
		if len(p) == 0 {
			return 0, nil
		}
		s.has = false
		p[0] = s.pend[0]
		return 1, nil
	}
	return s.nc.Read(p)
}

// readerOf lets the Framer read through whichever buffer the connection
// holds at the time.
type readerOf struct{ c *conn }

func (r readerOf) Read(p []byte) (int, error) { return r.c.br.Read(p) }

// idleRead waits for the next frame's first byte with the read buffer back
// in its pool, whenever nothing is buffered: the loop usually comes back
// here while the last response is still being written, so waiting only
// with no stream open would keep the buffer on most idle connections.
// Only over TLS: crypto/tls reads whole records from the socket either
// way, so the one-byte read adds no system call, only a pool round trip.
func (c *conn) idleRead() error {
	if c.tls == nil || c.br.Buffered() != 0 || c.src.has {
		return nil
	}
	c.br.Reset(nil)
	readBufs.Put(c.br)
	c.br = nil
	idleWaits.Add(1)
	_, err := io.ReadFull(c.nc, c.src.pend[:])
	c.br = readBufs.Get().(*bufio.Reader)
	c.br.Reset(&c.src)
	if err != nil {
		return err
	}
	c.src.has = true
	return nil
}

// serveFrames reads the preface and frames until an error ends the
// connection.
func (c *conn) serveFrames() error {
	c.mu.Lock()
	_ = c.fw.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.cfg.maxStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(c.cfg.streamWindow)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.cfg.maxHeader},
	)
	c.settingsSent++
	if d := c.cfg.connWindow - 65535; d > 0 {
		_ = c.fw.WriteWindowUpdate(0, uint32(d))
		c.recvWindow += d
	}
	c.flushLocked()
	c.mu.Unlock()

	_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.readHeader))
	var preface [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, preface[:]); err != nil {
		return err
	}
	if string(preface[:]) != http2.ClientPreface {
		return connError{code: http2.ErrCodeProtocol, reason: "bad_preface"}
	}
	for {
		// Flush before a read that may block: while whole frames are
		// buffered, what handlers and this loop queue waits for this
		// flush (busy), so it leaves in one write.
		if !c.frameBuffered() {
			c.mu.Lock()
			c.busy.Store(false)
			if c.goawayPending && c.maxClientID > 0 {
				c.sendGoAwayLocked()
			}
			c.flushLocked()
			err := c.werr
			c.mu.Unlock()
			if err != nil {
				return err
			}
		}
		if err := c.idleRead(); err != nil {
			return err
		}
		if err := c.readFrame(); err != nil {
			return err
		}
	}
}

// frameBuffered reports whether a whole frame is in the read buffer.
func (c *conn) frameBuffered() bool {
	n := c.br.Buffered()
	if n < 9 {
		return false
	}
	h, _ := c.br.Peek(9)
	return n >= 9+(int(h[0])<<16|int(h[1])<<8|int(h[2]))
}

// flushSoonLocked flushes unless the read loop is busy with buffered
// frames and will flush when done (handlers' responses then share its
// write). Otherwise the caller first gives way to the goroutines that are
// ready to run (runtime.Gosched) and flushes after them: handlers woken by
// the same poll of upstream sockets queue their frames meanwhile, so that
// their responses leave in one TLS record and one write, as an event loop
// writes once per round. Measured with perf/compare.sh (h2load -m10, one
// CPU): writes per request fell from 2.0 to 1.2. A handler that finds a
// yield under way leaves its frames to it.
func (c *conn) flushSoonLocked() {
	if c.busy.Load() || c.yielding || len(c.out.b) == 0 {
		return
	}
	c.yielding = true
	c.mu.Unlock()
	runtime.Gosched()
	c.mu.Lock()
	c.yielding = false
	if c.busy.Load() {
		return
	}
	c.flushLocked()
}

// readFrame reads and handles one frame; stream errors are answered here,
// a connection error is returned.
func (c *conn) readFrame() error {
	var typ http2.FrameType = 0xff
	if h, _ := c.br.Peek(9); len(h) == 9 {
		typ = http2.FrameType(h[3])
	}
	f, err := c.fr.ReadFrame()
	c.busy.Store(true)
	if err != nil {
		var fce http2.ConnectionError
		var fse http2.StreamError
		switch {
		case errors.As(err, &fse):
			// A HEADERS frame the Framer refused was not decoded: the
			// HPACK state is lost, so it ends the connection.
			if typ == http2.FrameHeaders || typ == http2.FrameContinuation || c.idleStream(fse.StreamID) {
				return connError{code: http2.ErrCodeProtocol, reason: "frame"}
			}
			c.mu.Lock()
			c.resetLocked(fse.StreamID, fse.Code)
			c.mu.Unlock()
			return nil
		case errors.As(err, &fce):
			return connError{code: http2.ErrCode(fce), reason: "frame"}
		case errors.Is(err, http2.ErrFrameTooLarge):
			return connError{code: http2.ErrCodeFrameSize, reason: "frame_too_large"}
		}
		return err
	}
	if !c.sawSettings {
		sf, ok := f.(*http2.SettingsFrame)
		if !ok || sf.IsAck() {
			return connError{code: http2.ErrCodeProtocol, reason: "first_settings"}
		}
		c.sawSettings = true
		c.mu.Lock()
		if !c.draining.Load() {
			_ = c.nc.SetReadDeadline(time.Time{})
		}
		c.armIdleLocked()
		c.mu.Unlock()
	}
	if err := c.frame(f); err != nil {
		var se streamError
		if !errors.As(err, &se) {
			return err
		}
		// Streams the client makes the server reset (refused, malformed,
		// frames on closed streams) cost like resets it sends.
		if !c.streamErrs.take(time.Now()) {
			return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "stream_errors", abuse: "stream_errors"}
		}
		c.mu.Lock()
		c.resetLocked(se.id, se.code)
		err := c.queuedLocked()
		c.mu.Unlock()
		return err
	}
	return nil
}

// idleStream is idleLocked for the read loop (maxClientID is its own).
func (c *conn) idleStream(id uint32) bool { return id%2 == 0 || id > c.maxClientID }

func (c *conn) frame(f http2.Frame) error {
	if c.hb.active {
		cf, ok := f.(*http2.ContinuationFrame)
		if !ok || cf.StreamID != c.hb.id { // the Framer checks this too
			return connError{code: http2.ErrCodeProtocol, reason: "continuation_order"}
		}
		return c.continuation(cf)
	}
	now := time.Now()
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.data(f, now)
	case *http2.HeadersFrame:
		return c.headers(f, now)
	case *http2.ContinuationFrame:
		return connError{code: http2.ErrCodeProtocol, reason: "unexpected_continuation"}
	case *http2.SettingsFrame:
		return c.settingsFrame(f, now)
	case *http2.PingFrame:
		if !c.pings.take(now) {
			return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "ping_flood", abuse: "ping"}
		}
		if f.IsAck() {
			return nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		_ = c.fw.WritePing(true, f.Data)
		return c.queuedLocked()
	case *http2.WindowUpdateFrame:
		return c.windowUpdate(f, now)
	case *http2.RSTStreamFrame:
		return c.rstStream(f, now)
	case *http2.PriorityFrame:
		if !c.priorities.take(now) {
			return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "priority_flood", abuse: "priority"}
		}
		if f.StreamDep == f.StreamID {
			return streamError{id: f.StreamID, code: http2.ErrCodeProtocol, reason: "priority"}
		}
		return nil
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.sendGoAwayLocked()
		c.mu.Unlock()
		return nil
	case *http2.PushPromiseFrame:
		return connError{code: http2.ErrCodeProtocol, reason: "push_promise"}
	}
	return nil // unknown frame types are ignored (§4.1, §5.5)
}

// queuedLocked counts a control reply and fails the connection when too
// many wait for a client that does not read.
func (c *conn) queuedLocked() error {
	c.queued++
	if c.queued > maxQueuedControl {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "control_queue", abuse: "control_queue"}
	}
	return nil
}

func (c *conn) settingsFrame(f *http2.SettingsFrame, now time.Time) error {
	if !c.settingsB.take(now) {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "settings_flood", abuse: "settings"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.IsAck() {
		if c.settingsSent == 0 {
			return connError{code: http2.ErrCodeProtocol, reason: "ack_mystery"}
		}
		c.settingsSent--
		return nil
	}
	// x/net also refuses repeated settings; RFC 9113 §6.5.3 says they
	// are processed in order, so only the count is bounded here.
	if f.NumSettings() > 100 {
		return connError{code: http2.ErrCodeProtocol, reason: "settings_big", abuse: "settings"}
	}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				return connError{code: http2.ErrCode(ce), reason: "setting_" + s.ID.String()}
			}
			return connError{code: http2.ErrCodeProtocol, reason: "setting"}
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.enc.setTableLimit(s.Val)
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - int64(c.peerInitWindow)
			for _, st := range c.streams {
				if st.sendWindow+delta > 1<<31-1 {
					return connError{code: http2.ErrCodeFlowControl, reason: "setting_win_size"}
				}
			}
			for _, st := range c.streams {
				st.sendWindow += delta
			}
			c.peerInitWindow = int32(s.Val)
			c.flowCond.Broadcast()
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = c.fw.WriteSettingsAck()
	return c.queuedLocked()
}

func (c *conn) windowUpdate(f *http2.WindowUpdateFrame, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A small increment answers DATA the server sent (dataSent counts
	// them); beyond that, small increments come out of the bucket.
	if f.Increment < 1024 {
		if c.dataSent > 0 {
			c.dataSent--
		} else if !c.windows.take(now) {
			return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "window_update_flood", abuse: "window_update"}
		}
	}
	if f.StreamID == 0 {
		if c.sendWindow+int64(f.Increment) > 1<<31-1 {
			return connError{code: http2.ErrCodeFlowControl, reason: "bad_flow"}
		}
		c.sendWindow += int64(f.Increment)
		c.flowCond.Broadcast()
		return nil
	}
	if c.idleLocked(f.StreamID) {
		return connError{code: http2.ErrCodeProtocol, reason: "window_update_idle"}
	}
	st := c.streams[f.StreamID]
	if st == nil || st.reset {
		return nil // closed: ignored (§5.1)
	}
	if st.sendWindow+int64(f.Increment) > 1<<31-1 {
		return streamError{id: f.StreamID, code: http2.ErrCodeFlowControl, reason: "bad_flow"}
	}
	st.sendWindow += int64(f.Increment)
	c.flowCond.Broadcast()
	return nil
}

func (c *conn) rstStream(f *http2.RSTStreamFrame, now time.Time) error {
	if !c.resets.take(now) {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "too_many_early_resets", abuse: "resets"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idleLocked(f.StreamID) {
		return connError{code: http2.ErrCodeProtocol, reason: "reset_idle_stream"}
	}
	if st := c.streams[f.StreamID]; st != nil && !st.reset {
		st.reset = true
		st.abort(errStreamReset{code: f.ErrCode})
		c.flowCond.Broadcast()
		c.maybeCloseLocked(st)
	}
	return nil
}

// idleLocked reports whether id names a stream in the idle state: never
// opened by the client (even ids are the server's, which pushes none).
func (c *conn) idleLocked(id uint32) bool {
	return id%2 == 0 || id > c.maxClientID
}

func (c *conn) data(f *http2.DataFrame, now time.Time) error {
	n := int32(f.Length) // padding counts against flow control
	data := f.Data()
	if len(data) == 0 && !f.StreamEnded() && !c.empties.take(now) {
		return connError{code: http2.ErrCodeEnhanceYourCalm, reason: "empty_data_flood", abuse: "empty_frames"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idleLocked(f.StreamID) {
		return connError{code: http2.ErrCodeProtocol, reason: "data_on_idle"}
	}
	if n > c.recvWindow {
		return connError{code: http2.ErrCodeFlowControl, reason: "data_flow"}
	}
	c.recvWindow -= n
	st := c.streams[f.StreamID]
	if st == nil || st.reset || st.remoteClosed {
		c.giveBackLocked(n)
		return streamError{id: f.StreamID, code: http2.ErrCodeStreamClosed, reason: "closed"}
	}
	if n > st.recvWindow {
		c.giveBackLocked(n)
		return streamError{id: f.StreamID, code: http2.ErrCodeFlowControl, reason: "flow_on_data_length"}
	}
	st.recvWindow -= n
	if pad := n - int32(len(data)); pad > 0 {
		c.giveBackLocked(pad)
		st.recvWindow += pad
		_ = c.fw.WriteWindowUpdate(st.id, uint32(pad))
	}
	if st.declLen >= 0 && st.gotLen+int64(len(data)) > st.declLen {
		c.giveBackLocked(int32(len(data)))
		return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "send_too_much"}
	}
	st.gotLen += int64(len(data))
	if len(data) > 0 {
		if st.bodyClosed {
			c.giveBackLocked(int32(len(data)))
		} else {
			st.body = append(st.body, data...)
			st.bodyCond.Signal()
		}
	}
	if f.StreamEnded() {
		if st.declLen >= 0 && st.gotLen != st.declLen {
			return streamError{id: st.id, code: http2.ErrCodeProtocol, reason: "content_length_mismatch"}
		}
		st.remoteClosed = true
		st.bodyErr = io.EOF
		st.bodyCond.Broadcast()
		c.maybeCloseLocked(st)
	}
	return nil
}

// giveBackLocked returns n connection-window bytes that no handler will
// read.
func (c *conn) giveBackLocked(n int32) {
	if n <= 0 {
		return
	}
	c.recvUnacked += n
	c.ackConnLocked()
}

// ackConnLocked sends a connection WINDOW_UPDATE once half the window is
// consumed.
func (c *conn) ackConnLocked() {
	if c.recvUnacked >= c.cfg.connWindow/2 {
		_ = c.fw.WriteWindowUpdate(0, uint32(c.recvUnacked))
		c.recvWindow += c.recvUnacked
		c.recvUnacked = 0
	}
}

// resetLocked sends RST_STREAM and forgets the stream's state.
func (c *conn) resetLocked(id uint32, code http2.ErrCode) {
	if c.closed {
		return
	}
	_ = c.fw.WriteRSTStream(id, code)
	if st := c.streams[id]; st != nil && !st.reset {
		st.reset = true
		st.abort(errStreamReset{code: code, local: true})
		c.flowCond.Broadcast()
		c.maybeCloseLocked(st)
	}
}

// maybeCloseLocked removes a stream both sides are done with.
func (c *conn) maybeCloseLocked(st *stream) {
	if !st.handlerDone || !(st.reset || st.remoteClosed) || c.streams[st.id] != st {
		return
	}
	if !st.reset && st.bodyUnread() > 0 {
		c.giveBackLocked(int32(st.bodyUnread()))
	}
	delete(c.streams, st.id)
	if len(c.streams) == 0 {
		c.armIdleLocked()
		if c.goaway {
			c.drainLocked()
		}
	}
}

// drainLocked, once GOAWAY is out and no stream is left, gives the client
// a second to read what was written before the connection closes.
func (c *conn) drainLocked() {
	if c.draining.Swap(true) {
		return
	}

	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
}

func (c *conn) sendGoAwayLocked() {
	if c.goaway || c.closed {
		return
	}
	c.goaway = true
	c.goawayPending = false
	_ = c.fw.WriteGoAway(c.maxClientID, http2.ErrCodeNo, nil)
	if len(c.streams) == 0 {
		c.drainLocked()
	}
}

// shutdown starts the graceful close (Server.Shutdown).
func (c *conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxClientID > 0 {
		c.sendGoAwayLocked()
		c.flushLocked()
		return
	}
	c.goawayPending = true
	time.AfterFunc(FreshConnGrace, func() {
		c.mu.Lock()
		c.sendGoAwayLocked()
		c.flushLocked()
		c.mu.Unlock()
	})
}

// armIdleLocked starts the idle timer when no stream is open.
func (c *conn) armIdleLocked() {
	if c.cfg.idle <= 0 || len(c.streams) > 0 || c.closed {
		return
	}
	if c.idleTimer == nil {
		c.idleTimer = time.AfterFunc(c.cfg.idle, c.idleFired)
		return
	}
	c.idleTimer.Reset(c.cfg.idle)
}

func (c *conn) idleFired() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.streams) > 0 || c.closed {
		return
	}
	c.sendGoAwayLocked()
	c.flushLocked()
	c.drainLocked()
}

// flushLocked writes everything queued. One goroutine writes at a time;
// frames queued meanwhile go out with its next Write.
func (c *conn) flushLocked() (unlocked bool) {
	if c.flushing {
		return false
	}
	c.flushing = true
	for len(c.out.b) > 0 && c.werr == nil {
		unlocked = true
		buf := c.out.b
		c.out.b = c.spare[:0]
		c.queued = 0
		c.mu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.cfg.stall))
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		c.spare = buf[:0]
		if cap(buf) > 64<<10 { // a burst's big buffer is not kept
			c.spare = nil
		}
		if err != nil {
			c.werr = err
			c.closed = true
			_ = c.nc.Close()
		}
	}
	if c.werr != nil {
		c.out.b = c.out.b[:0]
	}
	c.flushing = false
	c.flowCond.Broadcast()
	return unlocked
}

// dispatch hands a stream to an idle worker or starts one.
func (c *conn) dispatchLocked(st *stream) {
	c.running.Add(1)
	if c.work == nil { // made with the first worker, dropped with the last (2 KiB an idle connection need not hold)
		c.work = make(chan *stream, c.cfg.maxStreams)
	}
	if c.idleWorkers > 0 || c.workers >= int(c.cfg.maxStreams) {
		c.work <- st
		return
	}
	c.workers++
	go c.worker(st)
}

// workerIdle is how long a worker waits for another stream before it
// leaves.
const workerIdle = 5 * time.Second

func (c *conn) worker(st *stream) {
	idle := workerIdle
	if c.s.workerIdle > 0 {
		idle = c.s.workerIdle
	}
	// The timer is not reset per stream (a Reset and a three-way select per
	// stream were ~5 % of the proxy's CPU under h2load -m10): when it fires,
	// a worker idle for less than idle arms it again for the rest.
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		st.run()
		c.running.Done()
		c.mu.Lock()
		c.recycleLocked(st)
		c.idleWorkers++
		c.mu.Unlock()
		if st = c.await(t, idle); st == nil {
			return
		}
	}
}

// await waits for the connection's next stream. nil: the worker has left
// (idle for idle, or the connection ended and closed c.work).
func (c *conn) await(t *time.Timer, idle time.Duration) *stream {
	since := time.Now()
	for {
		select {
		case st, ok := <-c.work:
			c.mu.Lock()
			c.idleWorkers--
			if !ok {
				c.leaveLocked()
				st = nil
			}
			c.mu.Unlock()
			return st
		case <-t.C:
			if left := idle - time.Since(since); left > 0 {
				t.Reset(left)
				continue
			}
		}
		c.mu.Lock()
		select {
		case st, ok := <-c.work: // sent before the count below changed
			if ok {
				c.idleWorkers--
				c.mu.Unlock()
				t.Reset(idle) // its fire was taken above
				return st
			}
		default:
		}
		c.idleWorkers--
		c.leaveLocked()
		c.mu.Unlock()
		return nil
	}
}

// leaveLocked takes a leaving worker off the count; with the last one go
// the stream channel and the streams kept for reuse (an idle connection
// need not hold them), made again by the next dispatch.
func (c *conn) leaveLocked() {
	c.workers--
	if c.workers == 0 {
		c.work = nil
		c.free = nil
	}
}
