// Package dashboard is the operator's web page for the control plane:
// HTML, CSS and a small script embedded in the binary and served at /ui/
// by `rampart control`. The page holds no data itself: it asks for an API
// token (kept in sessionStorage, sent as an Authorization header, never a
// cookie) and reads the /v1 API with it, with GET /v1/events telling it
// what changed. See README.md.
package dashboard

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// Prefix is where the page is served.
const Prefix = "/ui/"

// CSP is the page's Content-Security-Policy: scripts, styles and requests
// only from the control plane itself, nothing inline, no framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'; frame-ancestors 'none'"

// Files lists the embedded files (names under Prefix) with their sizes.
func Files() map[string]int {
	out := map[string]int{}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := assets.ReadFile(p); err == nil {
				out[strings.TrimPrefix(p, "assets/")] = len(b)
			}
		}
		return nil
	})
	return out
}

// Handler serves the page under Prefix (and redirects /ui to /ui/). Only
// GET and HEAD; every answer carries the security headers.
func Handler() http.Handler {
	sub, _ := fs.Sub(assets, "assets")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
			return
		}
		name, ok := strings.CutPrefix(r.URL.Path, Prefix)
		if !ok {
			http.NotFound(w, r)
			return
		}
		name = strings.TrimPrefix(path.Clean("/"+name), "/")
		if name == "" {
			name = "index.html"
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}
