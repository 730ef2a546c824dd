package quickstart

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

type upstreams struct{ servers []*http.Server }

// startUpstreams runs the demo services: "users" (stable) and
// "users-canary". Each answers JSON naming its revision and echoing what it
// received, so a curl shows routing, the split and the forwarded headers.
func startUpstreams() (*upstreams, error) {
	u := &upstreams{}
	for _, s := range []struct{ addr, revision string }{
		{"127.0.0.1:9081", "stable"},
		{"127.0.0.1:9082", "canary"},
	} {
		lc := net.ListenConfig{}
		lc.SetMultipathTCP(false)
		ln, err := lc.Listen(context.Background(), "tcp", s.addr)
		if err != nil {
			u.close()
			return nil, fmt.Errorf("demo upstream %s on %s: %w", s.revision, s.addr, err)
		}
		srv := &http.Server{Handler: demoHandler(s.revision), ReadHeaderTimeout: 5 * time.Second}
		u.servers = append(u.servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Println("demo upstream stopped:", err)
			}
		}()
	}
	return u, nil
}

func (u *upstreams) close() {
	for _, s := range u.servers {
		_ = s.Close()
	}
}

func demoHandler(revision string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{
			"service":           "users",
			"revision":          revision,
			"method":            r.Method,
			"path":              r.URL.Path,
			"query":             r.URL.RawQuery,
			"body":              string(body),
			"x_request_id":      r.Header.Get("X-Request-Id"),
			"x_forwarded_for":   r.Header.Get("X-Forwarded-For"),
			"x_forwarded_proto": r.Header.Get("X-Forwarded-Proto"),
			"x_forwarded_host":  r.Header.Get("X-Forwarded-Host"),
			"timeout_ms":        r.Header.Get("X-Rampart-Timeout-Ms"),
		})
	})
}
