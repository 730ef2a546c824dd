package h2

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzServeConn feeds raw bytes after the client preface into a server
// connection: whatever they are, the connection must end (no hang) without
// a panic once the client side closes.
func FuzzServeConn(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "a"}, {":path", "/x"}, {"content-length", "3"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	_ = fr.WriteData(1, true, []byte("abc"))
	_ = fr.WritePing(false, [8]byte{1})
	_ = fr.WriteWindowUpdate(0, 1000)
	f.Add(seed.Bytes())
	f.Add(append(append([]byte(nil), seed.Bytes()[:9]...), 0, 0, 4, 9, 0, 0, 0, 0, 1))
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-T")
		w.Write(b)
		w.Header().Set("X-T", "t")
	}), ReadHeaderTimeout: 2 * time.Second, StallTimeout: 2 * time.Second, Logger: discardLogger()}
	f.Fuzz(func(t *testing.T, data []byte) {
		cc, sc := net.Pipe()
		done := make(chan struct{})
		go func() { s.ServeConn(sc); close(done) }()
		go func() { _, _ = io.Copy(io.Discard, cc) }()
		_ = cc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = cc.Write([]byte(http2.ClientPreface))
		_, _ = cc.Write(data)
		_ = cc.Close()
		select {
		case <-done:
		case <-time.After(liveness):
			t.Fatalf("connection still served %v after the client closed", liveness)
		}
	})
}

// FuzzParsePath holds parsePath to url.ParseRequestURI: whenever it takes
// a path, the URL must be the one net/url makes of it.
func FuzzParsePath(f *testing.F) {
	for _, p := range []string{"/", "/a/b?x=1", "/a?", "/a??", "/a?b?c", "/%41", "/a b", "/a!", "*", "//x/y",
		"/a\x7f", "/q?\x01", "/é", "/a?é", "/;,=@$&+:~._-", "http://x/y", ""} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		var got url.URL
		if !parsePath(p, &got) {
			return
		}
		want, err := url.ParseRequestURI(p)
		if err != nil {
			t.Fatalf("parsePath took %q, which url.ParseRequestURI refuses: %v", p, err)
		}
		if got != *want {
			t.Fatalf("parsePath(%q) = %#v, url.ParseRequestURI: %#v", p, got, *want)
		}
	})
}
