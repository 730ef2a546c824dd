package upstream

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/l7/wire"
)

func readHead(s string) (ResponseHead, http.Header, error) {
	h := http.Header{}
	rh, err := ReadResponseHead(bufio.NewReaderSize(strings.NewReader(s), 4096), h, 8192)
	return rh, h, err
}

func TestReadResponseHead(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want ResponseHead
		hdr  map[string]string
	}{
		{"content length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\n",
			ResponseHead{Status: 200, ProtoMinor: 1, ContentLength: 5}, map[string]string{"Content-Type": "text/plain", "Content-Length": "5"}},
		{"chunked", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
			ResponseHead{Status: 201, ProtoMinor: 1, ContentLength: -1, Chunked: true}, nil},
		{"close delimited", "HTTP/1.1 200 OK\r\n\r\n", ResponseHead{Status: 200, ProtoMinor: 1, ContentLength: -1, Close: true}, nil},
		{"no body status keeps conn", "HTTP/1.1 204 No Content\r\n\r\n", ResponseHead{Status: 204, ProtoMinor: 1, ContentLength: -1}, nil},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
			ResponseHead{Status: 200, ProtoMinor: 1, ContentLength: 0, Close: true}, nil},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", ResponseHead{Status: 200, ContentLength: 0, Close: true}, nil},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", ResponseHead{Status: 200, ContentLength: 0}, nil},
		{"no reason phrase", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", ResponseHead{Status: 404, ProtoMinor: 1, ContentLength: 0}, nil},
		{"bare LF and OWS", "HTTP/1.1 200 OK\nX-A:  v \t\nContent-Length: 0\n\n", ResponseHead{Status: 200, ProtoMinor: 1, ContentLength: 0}, map[string]string{"X-A": "v"}},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", ResponseHead{Status: 200, ProtoMinor: 1, ContentLength: 3}, nil},
		{"lower-case names canonicalised", "HTTP/1.1 200 OK\r\nx-custom-thing: 1\r\nset-cookie: a\r\nSet-Cookie: b\r\ncontent-length: 0\r\n\r\n",
			ResponseHead{Status: 200, ProtoMinor: 1, ContentLength: 0}, map[string]string{"X-Custom-Thing": "1", "Set-Cookie": "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rh, h, err := readHead(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if rh != tc.want {
				t.Errorf("head %+v, want %+v", rh, tc.want)
			}
			for k, v := range tc.hdr {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, h.Get(k), v, h)
				}
			}
		})
	}
	_, h, _ := readHead("HTTP/1.1 200 OK\r\nSet-Cookie: a\r\nSet-Cookie: b\r\nContent-Length: 0\r\n\r\n")
	if got := h["Set-Cookie"]; len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("repeated field: %q", got)
	}
}

func TestReadResponseHeadRejects(t *testing.T) {
	for name, in := range map[string]string{
		"both framings":           "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"te then cl":              "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
		"conflicting lengths":     "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"signed length":           "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
		"list length":             "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n",
		"huge length":             "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"unknown coding":          "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"te twice":                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"obs-fold":                "HTTP/1.1 200 OK\r\nX-A: 1\r\n\t2\r\n\r\n",
		"space in name":           "HTTP/1.1 200 OK\r\nX A: 1\r\n\r\n",
		"space before colon":      "HTTP/1.1 200 OK\r\nX-A : 1\r\n\r\n",
		"no colon":                "HTTP/1.1 200 OK\r\nX-A\r\n\r\n",
		"empty name":              "HTTP/1.1 200 OK\r\n: v\r\n\r\n",
		"NUL in value":            "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n",
		"CR in value":             "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n",
		"http/2 version":          "HTTP/2.0 200 OK\r\n\r\n",
		"two-digit status":        "HTTP/1.1 20 OK\r\n\r\n",
		"status out of range":     "HTTP/1.1 099 OK\r\n\r\n",
		"letters in status":       "HTTP/1.1 2x0 OK\r\n\r\n",
		"no space after status":   "HTTP/1.1 200OK\r\n\r\n",
		"lower-case http":         "http/1.1 200 OK\r\n\r\n",
		"control in reason":       "HTTP/1.1 200 O\x01K\r\n\r\n",
		"head too large":          "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: "+strings.Repeat("v", 1000)+"\r\n", 10) + "\r\n",
		"line longer than buffer": "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("v", 5000) + "\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := readHead(in); !errors.Is(err, ErrMalformed) {
				t.Fatalf("want ErrMalformed, got %v", err)
			}
		})
	}
	if _, _, err := readHead("HTTP/1.1 200 OK\r\nX-A: 1\r\n"); !errors.Is(err, io.EOF) {
		t.Errorf("truncated head: want EOF, got %v", err)
	}
}

func readBody(method, s string) (string, http.Header, bool, error) {
	br := bufio.NewReaderSize(strings.NewReader(s), 4096)
	h := http.Header{}
	rh, err := ReadResponseHead(br, h, 8192)
	if err != nil {
		return "", nil, false, err
	}
	tr := http.Header{}
	b := &wire.Body{}
	b.Reset(br, rh.Framing(method), rh.ContentLength, tr, 1024)
	out, err := io.ReadAll(b)
	return string(out), tr, b.Done(), err
}

func TestBodyFramings(t *testing.T) {
	cases := []struct {
		name, method, in, want string
		done                   bool
		trailer                string
	}{
		{"length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA", "hello", true, ""},
		{"zero length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "", true, ""},
		{"head has no body", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "", true, ""},
		{"304 has no body", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", "", true, ""},
		{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;a=b\r\n!\r\n0\r\n\r\n", "hello!", true, ""},
		{"chunked upper hex", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", "0123456789", true, ""},
		{"chunked trailer", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nGrpc-Status: 0\r\n\r\n", "hi", true, "0"},
		{"until close", "GET", "HTTP/1.1 200 OK\r\n\r\nall of it", "all of it", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, tr, done, err := readBody(tc.method, tc.in)
			if err != nil || got != tc.want || done != tc.done || tr.Get("Grpc-Status") != tc.trailer {
				t.Fatalf("body %q done %v trailer %v err %v", got, done, tr, err)
			}
		})
	}
}

func TestBodyErrors(t *testing.T) {
	for name, in := range map[string]string{
		"short length":        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"chunk cut":           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
		"no last chunk":       "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
		"bad chunk size":      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
		"empty chunk size":    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\nhello\r\n0\r\n\r\n",
		"signed chunk size":   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
		"overflow chunk size": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("f", 17) + "\r\n",
		"data longer":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhello\r\n0\r\n\r\n",
		"bad trailer":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n",
		"huge trailer":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: " + strings.Repeat("a", 2000) + "\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, _, err := readBody("GET", in); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func FuzzResponse(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nA: b\r\n\r\n")
	f.Add("HTTP/1.0 404 Not Found\r\n\r\nbody")
	f.Add("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		br := bufio.NewReaderSize(strings.NewReader(in), 256)
		h := http.Header{}
		rh, err := ReadResponseHead(br, h, 1024)
		if err != nil {
			return
		}
		if rh.Status < 100 || rh.Status > 999 {
			t.Fatalf("status %d accepted", rh.Status)
		}
		if rh.Chunked && rh.ContentLength >= 0 {
			t.Fatal("both framings accepted")
		}
		for k, vs := range h {
			for _, v := range vs {
				if strings.ContainsAny(k, " :\r\n") || strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("unsafe field %q: %q", k, v)
				}
			}
		}
		b := &wire.Body{}
		b.Reset(br, rh.Framing("GET"), rh.ContentLength, http.Header{}, 256)
		n, _ := io.Copy(io.Discard, b)
		if !rh.Chunked && rh.ContentLength >= 0 && n > rh.ContentLength {
			t.Fatalf("read %d bytes past Content-Length %d", n, rh.ContentLength)
		}
	})
}
