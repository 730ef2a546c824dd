package dashboard_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/control/dashboard"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func TestServesAssetsWithSecurityHeaders(t *testing.T) {
	h := dashboard.Handler()
	for path, ctype := range map[string]string{"/ui/": "text/html", "/ui/index.html": "text/html", "/ui/app.js": "text/javascript", "/ui/app.css": "text/css"} {
		r := get(t, h, "GET", path)
		body, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("GET %s: %d, %d bytes", path, r.StatusCode, len(body))
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", path, ct, ctype)
		}
		checkHeaders(t, path, r.Header)
	}
}

func checkHeaders(t *testing.T, path string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", path, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("%s: CSP %q allows inline code", path, csp)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("%s: headers %v", path, h)
	}
}

func TestRefusals(t *testing.T) {
	h := dashboard.Handler()
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/ui/missing.js", 404},
		{"GET", "/ui/../go.mod", 404},
		{"GET", "/ui/assets/app.js", 404},
		{"GET", "/elsewhere", 404},
		{"POST", "/ui/", 405},
		{"DELETE", "/ui/app.js", 405},
		{"GET", "/ui", 301},
	} {
		r := get(t, h, c.method, c.path)
		if r.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, r.StatusCode, c.code)
		}
		checkHeaders(t, c.path, r.Header)
	}
	if r := get(t, h, "GET", "/ui"); r.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui redirects to %q", r.Header.Get("Location"))
	}
}

// The CSP forbids inline code, so the page must have none: no <script>
// without src, no <style>, no style= or on...= attributes.
func TestNoInlineCode(t *testing.T) {
	r := get(t, dashboard.Handler(), "GET", "/ui/")
	html, _ := io.ReadAll(r.Body)
	for _, re := range []string{`<script(?:\s[^>]*)?>\s*[^<\s]`, `<style`, `\sstyle=`, `\son[a-z]+=`, `https?://`} {
		if m := regexp.MustCompile(`(?i)` + re).Find(html); m != nil {
			t.Errorf("index.html has %q (matches %s)", m, re)
		}
	}
	js := get(t, dashboard.Handler(), "GET", "/ui/app.js")
	b, _ := io.ReadAll(js.Body)
	for _, bad := range []string{"innerHTML", "eval(", "document.cookie", "localStorage", "http://", "https://"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}

// TestPageWeight prints the figure in README.md:
// go test -count=1 -run TestPageWeight -v ./control/dashboard
func TestPageWeight(t *testing.T) {
	files := dashboard.Files()
	if len(files) != 3 {
		t.Fatalf("files %v, want index.html, app.css, app.js", files)
	}
	var raw, gz int
	for name := range files {
		r := get(t, dashboard.Handler(), "GET", "/ui/"+name)
		b, _ := io.ReadAll(r.Body)
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = w.Write(b)
		_ = w.Close()
		raw += len(b)
		gz += buf.Len()
		t.Logf("%-10s %6d bytes, %5d gzip'd", name, len(b), buf.Len())
	}
	t.Logf("page weight: %d bytes (HTML+CSS+JS), %d bytes gzip'd", raw, gz)
}
