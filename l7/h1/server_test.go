package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// start serves s on a loopback listener and returns its address; at the
// test's end it closes the listener and shuts s down.
func start(t testing.TB, s *Server) string {
	t.Helper()
	ln := listen(t, s)
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// listen serves every connection accepted on a loopback listener with s;
// the listener closes at the test's end.
func listen(t testing.TB, s *Server) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.ServeConn(c)
		}
	}()
	return ln
}

func echoServer(t testing.TB) (*Server, string) {
	// The timeouts are liveness bounds: no test of the echo server is about
	// them, so a loaded box must not hit them.
	s := &Server{MaxHeaderBytes: 4096, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "body: "+err.Error(), 400)
				return
			}
			w.Header().Set("X-Method", r.Method)
			w.Header().Set("X-Host", r.Host)
			w.Header().Set("X-Uri", r.RequestURI)
			w.Header().Set("X-Path", r.URL.Path)
			w.Header().Set("X-Te", strings.Join(r.TransferEncoding, ","))
			w.Header().Set("X-Cl", itoa(r.ContentLength))
			w.Header().Set("X-A", strings.Join(r.Header["X-A"], "|"))
			_, _ = w.Write(body)
		})}
	return s, start(t, s)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// exchange sends raw bytes, half-closes, and returns everything the server
// wrote before closing.
func exchange(t testing.TB, addr, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	out, _ := io.ReadAll(c)
	return string(out)
}

func TestParserRefusesAmbiguousRequests(t *testing.T) {
	_, addr := echoServer(t)
	for _, tc := range []struct{ name, raw, status string }{
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400"},
		{"TE and CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", "400"},
		{"conflicting CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "400"},
		{"CL list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", "400"},
		{"signed CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", "400"},
		{"TE gzip", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "501"},
		{"TE twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "501"},
		{"TE in 1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400"},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", "400"},
		{"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nX-A : 1\r\n\r\n", "400"},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n", "400"},
		{"CR in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n", "400"},
		{"no host", "GET / HTTP/1.1\r\n\r\n", "400"},
		{"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"},
		{"bad version", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", "505"},
		{"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "505"},
		{"junk version", "GET / FOO\r\nHost: a\r\n\r\n", "400"},
		{"double space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
		{"space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
		{"control in target", "GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
		{"non-ascii target", "GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
		{"bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
		{"asterisk not OPTIONS", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
		{"header too large", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: "+strings.Repeat("v", 1000)+"\r\n", 5) + "\r\n", "431"},
		{"line too long", "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("v", 20000) + "\r\n\r\n", "431"},
		{"bad expect", "POST / HTTP/1.1\r\nHost: a\r\nExpect: magic\r\nContent-Length: 1\r\n\r\nx", "417"},
		{"bad percent", "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := exchange(t, addr, tc.raw)
			if !strings.HasPrefix(out, "HTTP/1.1 "+tc.status+" ") || !strings.Contains(out, "Connection: close") {
				t.Fatalf("got %q, want a %s and the connection closed", out, tc.status)
			}
			if strings.Count(out, "HTTP/1.1 ") != 1 {
				t.Fatalf("more than one response: %q", out)
			}
		})
	}
}

func TestBadChunkingFailsTheBody(t *testing.T) {
	_, addr := echoServer(t)
	for name, raw := range map[string]string{
		"bad size":     "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
		"missing CRLF": "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
		"cut short":    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
	} {
		t.Run(name, func(t *testing.T) {
			out := exchange(t, addr, raw+"GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
			if !strings.HasPrefix(out, "HTTP/1.1 400 ") || strings.Contains(out, "/second") {
				t.Fatalf("got %q: want a 400 and the rest of the stream ignored", out)
			}
		})
	}
}

func TestRequestsAreParsed(t *testing.T) {
	_, addr := echoServer(t)
	out := exchange(t, addr, "\r\nPOST /a%2Fb/c?q=1 HTTP/1.1\r\nhost: Example.com\r\nx-a: 1\r\nX-A: 2\r\nContent-Length: 5\r\n\r\nhello"+
		"POST /chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nTrailer-A: 1\r\n\r\n"+
		"GET http://other.example/abs?x HTTP/1.1\r\nHost: ignored\r\n\r\n"+
		"OPTIONS * HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	for _, want := range []string{
		"X-Method: POST", "X-Host: Example.com", "X-Uri: /a%2Fb/c?q=1", "X-Path: /a/b/c", "X-A: 1|2", "X-Cl: 5", "5\r\nhello\r\n",
		"X-Uri: /chunked", "X-Te: chunked", "X-Cl: -1", "abcde",
		"X-Host: other.example", "X-Path: /abs",
		"X-Method: OPTIONS", "X-Uri: *",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "HTTP/1.1 200 OK"); n != 4 {
		t.Errorf("%d responses, want 4 (pipelined)", n)
	}
}

func TestHTTP10AndKeepAlive(t *testing.T) {
	addr := start(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	})})
	out := exchange(t, addr, "GET /1 HTTP/1.0\r\n\r\nGET /2 HTTP/1.0\r\n\r\n")
	if strings.Count(out, "HTTP/1.1 200") != 1 || !strings.Contains(out, "Connection: close") {
		t.Fatalf("HTTP/1.0 without keep-alive must close after one response: %q", out)
	}
	out = exchange(t, addr, "GET /1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\n")
	if strings.Count(out, "HTTP/1.1 200") != 2 || !strings.Contains(out, "Connection: keep-alive") {
		t.Fatalf("HTTP/1.0 keep-alive: %q", out)
	}
}

func TestResponseFraming(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "5")
			io.WriteString(w, "hello")
		case "/chunked":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, "hel")
			w.(http.Flusher).Flush()
			io.WriteString(w, "lo")
			w.Header().Set("X-Sum", "5")
			w.Header().Set(http.TrailerPrefix+"X-Late", "1")
		case "/empty":
		case "/nocontent":
			w.WriteHeader(204)
		case "/short":
			w.Header().Set("Content-Length", "10")
			io.WriteString(w, "short")
		case "/long":
			w.Header().Set("Content-Length", "2")
			if _, err := io.WriteString(w, "toolong"); err != ErrBodyTooLong {
				panic("want ErrBodyTooLong")
			}
		case "/split":
			w.Header().Set("X-Bad", "a\r\nInjected: yes")
		case "/panic":
			panic("boom")
		case "/hints":
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(103)
			w.WriteHeader(200)
		}
	})}
	addr := start(t, s)
	check := func(raw string, wants ...string) string {
		t.Helper()
		out := exchange(t, addr, raw)
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%q: missing %q in %q", raw, w, out)
			}
		}
		return out
	}
	check("GET /length HTTP/1.1\r\nHost: a\r\n\r\n", "Content-Length: 5\r\n", "\r\n\r\nhello")
	check("GET /chunked HTTP/1.1\r\nHost: a\r\n\r\n", "Transfer-Encoding: chunked", "3\r\nhel\r\n2\r\nlo\r\n0\r\n", "X-Sum: 5\r\n", "X-Late: 1\r\n")
	check("GET /chunked HTTP/1.0\r\n\r\n", "Connection: close", "\r\n\r\nhello")
	check("GET /empty HTTP/1.1\r\nHost: a\r\n\r\n", "Content-Length: 0")
	out := check("HEAD /length HTTP/1.1\r\nHost: a\r\n\r\nGET /nocontent HTTP/1.1\r\nHost: a\r\n\r\n", "Content-Length: 5", "HTTP/1.1 204 No Content")
	if strings.Contains(out, "hello") {
		t.Errorf("HEAD response carried a body: %q", out)
	}
	out = check("GET /short HTTP/1.1\r\nHost: a\r\n\r\nGET /length HTTP/1.1\r\nHost: a\r\n\r\n", "Content-Length: 10")
	if strings.Count(out, "HTTP/1.1") != 1 {
		t.Errorf("a response shorter than its Content-Length must end the connection: %q", out)
	}
	check("GET /long HTTP/1.1\r\nHost: a\r\n\r\n", "\r\n\r\nto")
	if out := check("GET /split HTTP/1.1\r\nHost: a\r\n\r\n"); strings.Contains(out, "Injected") {
		t.Errorf("header injection passed: %q", out)
	}
	if out := exchange(t, addr, "GET /panic HTTP/1.1\r\nHost: a\r\n\r\n"); out != "" {
		t.Errorf("panicking handler: %q", out)
	}
	out = check("GET /hints HTTP/1.1\r\nHost: a\r\n\r\n", "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload", "HTTP/1.1 200 OK")
	_ = out
}

func TestExpectContinue(t *testing.T) {
	_, addr := echoServer(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q before sending the body", line)
	}
	br.ReadString('\n')
	io.WriteString(c, "data")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "data" {
		t.Fatalf("body %q", b)
	}
}

func TestClientGoneCancelsContext(t *testing.T) {
	var cancelled atomic.Bool
	arrived, ended := make(chan struct{}), make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			cancelled.Store(true)
		case <-ended: // the test gave up waiting
		}
	})}
	defer close(ended)
	addr := start(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	<-arrived
	c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !cancelled.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the request context was not cancelled when the client left")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A pipelined request that arrives while the handler watches the
// connection is served after it, not lost.
func TestWatchKeepsPipelinedBytes(t *testing.T) {
	slowRunning := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(slowRunning)
			done := r.Context().Done() // starts the watcher
			// Hold /slow until the watcher has read the first byte of
			// /next (an order, not a time), so that byte must be kept.
			w := &r.Context().(*reqContext).c.watch
			w.mu.Lock()
			finished := w.finished
			w.mu.Unlock()
			select {
			case <-done:
				panic("cancelled although the client is there")
			case <-finished:
			case <-time.After(30 * time.Second): // a liveness bound
				panic("the watcher never read the pipelined request")
			}
			if !w.saved {
				panic("the watcher ended without the pipelined byte")
			}
		}
		io.WriteString(w, r.URL.Path)
	})}
	addr := start(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-slowRunning // the handler watches the connection when /next arrives
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	out, _ := io.ReadAll(c)
	if !strings.Contains(string(out), "/slow") || !strings.Contains(string(out), "/next") {
		t.Fatalf("got %q", out)
	}
}

func TestShutdownClosesIdleAndFinishesActive(t *testing.T) {
	release, slowRunning := make(chan struct{}), make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(slowRunning)
			<-release
		}
		io.WriteString(w, "done")
	})}
	ln := listen(t, s)
	idle, _ := net.Dial("tcp", ln.Addr().String())
	busy, _ := net.Dial("tcp", ln.Addr().String())
	io.WriteString(idle, "GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(idle)
	first, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(first.Body)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-slowRunning
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	_ = idle.SetReadDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection: %v, want EOF", err)
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Fatalf("active request: %q close=%v", b, resp.Close)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func FuzzServe(f *testing.F) {
	f.Add("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	f.Add("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
	f.Add("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	f.Add("GET http://h/p?q HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n")
	var requests atomic.Int64
	s := &Server{MaxHeaderBytes: 2048, ReadHeaderTimeout: time.Second, IdleTimeout: time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			if r.Method == "" || r.Proto == "" || (r.ProtoMinor == 1 && r.Host == "" && r.URL.Host == "") {
				panic("handler got an incomplete request")
			}
			if len(r.Header["Transfer-Encoding"]) > 0 {
				panic("Transfer-Encoding reached the handler")
			}
			if r.ContentLength > 0 && len(r.TransferEncoding) > 0 {
				panic("two framings")
			}
			_, _ = io.Copy(w, r.Body)
		})}
	f.Fuzz(func(t *testing.T, raw string) {
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() { s.ServeConn(server); close(done) }()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		_ = client.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(client, raw)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("ServeConn did not return for input %q", raw)
		}
	})
}

// A connection accepted before Shutdown that has not sent its request yet
// (during a graceful re-exec: accepted just before the listener closed)
// gets its first request served, with Connection: close; one that stays
// silent is closed after the grace, and Shutdown returns.
func TestShutdownServesAFreshConnectionsFirstRequest(t *testing.T) {
	s := &Server{ReadHeaderTimeout: 500 * time.Millisecond, IdleTimeout: time.Minute,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") })}
	ln := listen(t, s)
	fresh, _ := net.Dial("tcp", ln.Addr().String())
	defer fresh.Close()
	silent, _ := net.Dial("tcp", ln.Addr().String())
	defer silent.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) { // both registered
		if s.conns.Len() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("liveness: connections not registered")
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	for !s.shutting.Load() {
		time.Sleep(time.Millisecond)
	}
	io.WriteString(fresh, "GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
	_ = fresh.SetReadDeadline(time.Now().Add(30 * time.Second)) // a liveness bound
	resp, err := http.ReadResponse(bufio.NewReader(fresh), nil)
	if err != nil {
		t.Fatalf("fresh connection's first request after Shutdown: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Fatalf("fresh connection: %q close=%v", b, resp.Close)
	}
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent connection: %v, want EOF", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
