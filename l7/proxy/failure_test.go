package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

func singleRoute(l *lab, addr string, mutate func(r *snapshot.Route)) {
	c := l.config(addr)
	r := getRoute("r", "/{rest...}", "app")
	r.Methods = nil
	r.RequestClass = "write"
	r.Idempotency = "none"
	if mutate != nil {
		mutate(&r)
	}
	c.Routes = []snapshot.Route{r}
	l.apply(c)
}

func TestUnreachableUpstreamIs502(t *testing.T) {
	l := newLab(t)
	singleRoute(l, deadAddr(t), nil)
	code, body, resp := get(t, http.DefaultClient, l.url("http", "/x"))
	if code != 502 || !strings.Contains(body, resp.Header.Get("X-Request-Id")) {
		t.Fatalf("got %d %q", code, body)
	}
	if n := testutil.ToFloat64(l.p.metrics.upstreamErrors.WithLabelValues("app", "connect")); n != 1 {
		t.Errorf("connect errors = %v", n)
	}
}

func TestSlowUpstreamIs504WithinRouteTimeout(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Minute): // answers only after the client's liveness bound
		case <-r.Context().Done():
		}
	})
	singleRoute(l, up.Addr(), func(r *snapshot.Route) { r.TimeoutMs = 200 })
	start := time.Now()
	// 504 (not the upstream's late 200, not a client timeout) is the route
	// timeout at work; 30 s is a liveness bound, not a speed bound.
	code, _, _ := get(t, &http.Client{Timeout: 30 * time.Second}, l.url("http", "/x"))
	t.Logf("504 after %s with a 200 ms route timeout", time.Since(start).Round(time.Millisecond))
	if code != 504 {
		t.Fatalf("got %d, want 504 from the 200 ms route timeout", code)
	}
}

func TestClientGoneIsLoggedAs499(t *testing.T) {
	l := newLab(t)
	arrived := make(chan struct{})
	up := startUpstream(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	singleRoute(l, up.Addr(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", l.url("http", "/x"), nil)
	go func() { <-arrived; cancel() }()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("request should have been cancelled")
	}
	eventually(t, 30*time.Second, "a 499 to be counted", func() bool {
		return testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("r", "app", "499")) == 1
	})
	if n := testutil.ToFloat64(l.p.metrics.requests.WithLabelValues("r", "app", "502")); n != 0 {
		t.Errorf("client cancel counted as 502 (%v)", n)
	}
}

// rawUpstream answers every connection with a fixed byte string.
func rawUpstream(t testing.TB, response string, closeAfter bool) string {
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
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, response); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestMalformedUpstreamResponsesAre502(t *testing.T) {
	for name, resp := range map[string]string{
		"both framings":       "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"obs-fold":            "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n",
		"conflicting lengths": "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		"gzip coding":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"not http":            "SSH-2.0-OpenSSH\r\n\r\n",
		"space before colon":  "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			l := newLab(t)
			singleRoute(l, rawUpstream(t, resp, true), nil)
			if code, _, _ := get(t, http.DefaultClient, l.url("http", "/x")); code != 502 {
				t.Fatalf("got %d, want 502", code)
			}
		})
	}
}

func TestUpstreamCutMidBodyAbortsClientResponse(t *testing.T) {
	l := newLab(t)
	singleRoute(l, rawUpstream(t, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly-ten-b", true), nil)
	for _, c := range []*http.Client{l.h1(), l.h2()} {
		// The client must see an error: at once, or when the body ends short.
		resp, err := c.Get(l.url("https", "/x"))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if err == nil {
			t.Fatalf("%s: the truncated response looked complete", resp.Proto)
		}
	}
}

func TestChunkedUpstreamResponseWithTrailers(t *testing.T) {
	l := newLab(t)
	singleRoute(l, rawUpstream(t, "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n", false), nil)
	for _, c := range []*http.Client{l.h1(), l.h2()} {
		resp, err := c.Get(l.url("https", "/x"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "hello world" || resp.Trailer.Get("X-Sum") != "42" {
			t.Fatalf("%s: body %q err %v trailer %v", resp.Proto, b, err, resp.Trailer)
		}
	}
}

func TestHopByHopHeadersAreNotForwarded(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Secret-Hop")
		w.Header().Set("X-Secret-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-End", "kept")
	})
	singleRoute(l, up.Addr(), nil)
	req, _ := http.NewRequest("GET", l.url("http", "/x"), nil)
	req.Header.Set("Connection", "X-Client-Hop")
	req.Header.Set("X-Client-Hop", "1")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Proxy-Connection", "keep-alive")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("X-End", "kept")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	in := up.Last().Header
	for _, h := range []string{"X-Client-Hop", "Te", "Proxy-Connection"} {
		if in.Get(h) != "" {
			t.Errorf("upstream received hop-by-hop %s", h)
		}
	}
	if in.Get("X-End") != "kept" || in.Get("X-Forwarded-For") != "203.0.113.9, 127.0.0.1" {
		t.Errorf("upstream headers %v", in)
	}
	for _, h := range []string{"X-Secret-Hop", "Keep-Alive"} {
		if resp.Header.Get(h) != "" {
			t.Errorf("client received hop-by-hop %s", h)
		}
	}
	if resp.Header.Get("X-End") != "kept" {
		t.Error("end-to-end response header lost")
	}
}

func TestRequestBodies(t *testing.T) {
	l := newLab(t)
	up := startUpstream(t, "echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Len", r.Header.Get("Content-Length"))
		w.Header().Set("X-TE", strings.Join(r.TransferEncoding, ","))
		_, _ = w.Write(b)
	})
	c := l.config(up.Addr())
	r := getRoute("r", "/{rest...}", "app")
	r.Methods, r.RequestClass, r.Idempotency = []string{"POST"}, "write", "none"
	c.Routes = []snapshot.Route{r}
	c.Listeners[0].MaxBodyBytes = 1 << 20
	c.Listeners[1].MaxBodyBytes = 1 << 20
	l.apply(c)
	big := strings.Repeat("0123456789", 50_000) // 500 KB
	for _, tc := range []struct {
		name    string
		client  *http.Client
		url     string
		body    io.Reader
		length  int64
		wantTE  string
		wantLen string
	}{
		{"h1 content-length", http.DefaultClient, l.url("http", "/a"), strings.NewReader(big), int64(len(big)), "", "500000"},
		{"h1 chunked", http.DefaultClient, l.url("http", "/a"), io.MultiReader(strings.NewReader(big)), -1, "chunked", ""},
		{"h2 content-length", l.h2(), l.url("https", "/a"), strings.NewReader(big), int64(len(big)), "", "500000"},
		{"h2 unknown length", l.h2(), l.url("https", "/a"), io.MultiReader(strings.NewReader(big)), -1, "chunked", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", tc.url, tc.body)
			req.ContentLength = tc.length
			resp, err := tc.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != big {
				t.Fatalf("status %d, body %d bytes", resp.StatusCode, len(b))
			}
			if resp.Header.Get("X-TE") != tc.wantTE || resp.Header.Get("X-Len") != tc.wantLen {
				t.Errorf("upstream saw TE %q length %q", resp.Header.Get("X-TE"), resp.Header.Get("X-Len"))
			}
		})
	}
	t.Run("over max_body_bytes is 413", func(t *testing.T) {
		huge := strings.Repeat("x", 2<<20)
		for _, chunked := range []bool{false, true} {
			var body io.Reader = strings.NewReader(huge)
			if chunked {
				body = io.MultiReader(body)
			}
			req, _ := http.NewRequest("POST", l.url("http", "/a"), body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("chunked=%v: %v", chunked, err)
			}
			resp.Body.Close()
			if resp.StatusCode != 413 {
				t.Fatalf("chunked=%v: status %d, want 413", chunked, resp.StatusCode)
			}
		}
	})
}

// Headers a wrapping handler set before the proxy ran (Alt-Svc, RateLimit-*)
// survive the reset that drops a failed upstream answer's headers, however
// many there are.
func TestResetHeaderKeepsPresetKeys(t *testing.T) {
	for _, preset := range [][]string{nil, {"Alt-Svc"}, {"Alt-Svc", "Ratelimit-Limit", "Ratelimit-Remaining", "Retry-After"}} {
		rec := httptest.NewRecorder()
		for _, k := range preset {
			rec.Header().Set(k, "pre")
		}
		f := &forwarding{w: rec}
		f.preset.note(rec.Header())
		rec.Header().Set("X-From-Upstream", "1")
		rec.Header().Set("Content-Type", "text/plain")
		f.resetHeader()
		if len(rec.Header()) != len(preset) {
			t.Errorf("preset %v: header after reset %v", preset, rec.Header())
		}
		for _, k := range preset {
			if rec.Header().Get(k) != "pre" {
				t.Errorf("preset %v: %s lost on reset", preset, k)
			}
		}
	}
}
