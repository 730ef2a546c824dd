package h2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

func TestServeGET(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 || r.Host != ts0host(r) {
			t.Errorf("proto %d host %q", r.ProtoMajor, r.Host)
		}
		w.Header().Set("X-Path", r.URL.Path+"?"+r.URL.RawQuery)
		io.WriteString(w, "hello "+r.Header.Get("User-Agent"))
	}))
	res, err := ts.client().Get(ts.url("/a/b?x=1"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "hello Go-http-client/2.0" || res.Header.Get("X-Path") != "/a/b?x=1" {
		t.Fatalf("got %d %q %v", res.StatusCode, body, res.Header)
	}
	if res.Header.Get("Date") == "" || res.ContentLength != int64(len(body)) {
		t.Fatalf("Date %q, Content-Length %d", res.Header.Get("Date"), res.ContentLength)
	}
}

func ts0host(r *http.Request) string { return r.URL.Host + r.Host }

// TestBodiesBothWays sends and receives bodies far over every window, so
// both sides wait for WINDOW_UPDATE frames.
func TestBodiesBothWays(t *testing.T) {
	ts := serve(t, &Server{StreamWindow: 64 << 10, ConnWindow: 64 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		w.Header().Set("X-Sum", fmt.Sprintf("%x", h.Sum(nil)))
		w.Header().Set("X-Len", fmt.Sprint(n, " ", r.ContentLength))
		chunk := bytes.Repeat([]byte("z"), 10000)
		for range 500 {
			if _, err := w.Write(chunk); err != nil {
				t.Errorf("write: %v", err)
				return
			}
		}
	}))
	payload := bytes.Repeat([]byte("0123456789abcdef"), 200000) // 3.2 MB
	want := fmt.Sprintf("%x", sha256.Sum256(payload))
	cl := ts.client()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cl.Post(ts.url("/up"), "application/octet-stream", bytes.NewReader(payload))
			if err != nil {
				t.Error(err)
				return
			}
			n, _ := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.Header.Get("X-Sum") != want || n != 5000000 || res.Header.Get("X-Len") != fmt.Sprint(len(payload), " ", len(payload)) {
				t.Errorf("sum %s len %s, response %d bytes", res.Header.Get("X-Sum"), res.Header.Get("X-Len"), n)
			}
		}()
	}
	wg.Wait()
}

func TestManyStreamsOneConn(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	}))
	cl := ts.client()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("/%d", i)
			res, err := cl.Get(ts.url(p))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if string(b) != p {
				t.Errorf("got %q want %q", b, p)
			}
		}()
	}
	wg.Wait()
}

func TestTrailersBothWays(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Declared")
		w.WriteHeader(200)
		w.Write(b)
		w.Header().Set("X-Declared", "d:"+r.Trailer.Get("X-Req"))
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	}))
	req, _ := http.NewRequest("POST", ts.url("/"), io.NopCloser(strings.NewReader("body")))
	req.Trailer = http.Header{"X-Req": {"rt"}}
	res, err := ts.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "body" || res.Trailer.Get("X-Declared") != "d:rt" || res.Trailer.Get("X-Late") != "late" {
		t.Fatalf("body %q trailers %v", b, res.Trailer)
	}
	if res.Header.Get("X-Declared") != "" {
		t.Fatalf("a trailer went out in the head: %v", res.Header)
	}
}

func TestFlushStreams(t *testing.T) {
	next := make(chan struct{})
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		<-next
		io.WriteString(w, "second")
	}))
	res, err := ts.client().Get(ts.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("first read %q %v", buf, err)
	}
	close(next)
	rest, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(rest) != "second" {
		t.Fatalf("rest %q", rest)
	}
}

func TestHeadAndNoBodyStatuses(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(204)
			if _, err := w.Write([]byte("x")); err != http.ErrBodyNotAllowed {
				t.Errorf("write on 204: %v", err)
			}
			return
		}
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	}))
	cl := ts.client()
	res, err := cl.Head(ts.url("/"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if len(b) != 0 || res.ContentLength != 5 {
		t.Fatalf("HEAD: %q, length %d", b, res.ContentLength)
	}
	res, err = cl.Get(ts.url("/204"))
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("204: %v %v", res, err)
	}
}

func TestExpectContinue(t *testing.T) {
	ts := serve(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	rc := ts.raw(t)
	rc.handshake()
	must(t, rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: rc.block(
		":method", "POST", ":scheme", "http", ":authority", "a", ":path", "/", "expect", "100-continue", "content-length", "2")}))
	rc.until("100", func(f http2.Frame) bool {
		mh, ok := f.(*http2.MetaHeadersFrame)
		return ok && mh.PseudoValue("status") == "100"
	})
	must(t, rc.fr.WriteData(1, true, []byte("ok")))
	if st := rc.response(1); st != "200" {
		t.Fatalf("status %s", st)
	}
}

// TestShutdownGoAway: Shutdown sends GOAWAY naming the last stream, lets
// the open stream finish, refuses later streams and closes.
func TestShutdownGoAway(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := &Server{}
	ts := serve(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "done")
	}))
	rc := ts.raw(t)
	rc.handshake()
	rc.get(1, true)
	<-started
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), liveness)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	ga := rc.goAway()
	if ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v last %d", ga.ErrCode, ga.LastStreamID)
	}
	rc.get(3, true)
	if code := rc.reset(3); code != http2.ErrCodeRefusedStream {
		t.Fatalf("stream 3 after GOAWAY: %v", code)
	}
	close(release)
	if st := rc.response(1); st != "200" {
		t.Fatalf("status %s", st)
	}
	if !rc.closed() {
		t.Fatal("connection still open after the drain")
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestIdleTimeoutGoAway(t *testing.T) {
	ts := serve(t, &Server{IdleTimeout: 50 * time.Millisecond}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	rc := ts.raw(t)
	rc.handshake()
	rc.get(1, true)
	rc.response(1)
	if ga := rc.goAway(); ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v %d", ga.ErrCode, ga.LastStreamID)
	}
	if !rc.closed() {
		t.Fatal("idle connection not closed")
	}
}

func TestHandlerPanicResetsStream(t *testing.T) {
	ts := serve(t, &Server{Logger: discardLogger()}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
	}))
	rc := ts.raw(t)
	rc.handshake()
	rc.getPath(1, "/panic", true)
	if code := rc.reset(1); code != http2.ErrCodeInternal {
		t.Fatalf("code %v", code)
	}
	rc.get(3, true)
	if st := rc.response(3); st != "200" {
		t.Fatalf("after a panic: %s", st)
	}
}
