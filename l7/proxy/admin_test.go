package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// /debug/pprof is not on the admin handler unless WithPprof adds it, and
// adding it keeps every other admin endpoint.
func TestPprofOnlyWhenAsked(t *testing.T) {
	p := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	plain := httptest.NewServer(p.AdminHandler())
	t.Cleanup(plain.Close)
	with := httptest.NewServer(WithPprof(p.AdminHandler()))
	t.Cleanup(with.Close)
	status := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		if c := status(plain.URL + path); c != http.StatusNotFound {
			t.Errorf("without pprof: %s answered %d, want 404", path, c)
		}
		if c := status(with.URL + path); c != http.StatusOK {
			t.Errorf("with pprof: %s answered %d, want 200", path, c)
		}
	}
	for _, path := range []string{"/healthz", "/metrics", "/status"} {
		if a, b := status(plain.URL+path), status(with.URL+path); a != 200 || b != 200 {
			t.Errorf("%s: %d without pprof, %d with, want 200 both", path, a, b)
		}
	}
}
