package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Answer is what a lab upstream answers: who served the request.
type Answer struct {
	Site      string `json:"site"`
	Region    string `json:"region"`
	Upstream  string `json:"upstream"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	RequestID string `json:"request_id"`
	Tenant    string `json:"tenant,omitempty"` // X-Rampart-Tenant, as the proxy sent it
	// From is the address the request came from: the proxy's site's link
	// address (Lab.SiteOf maps it to the site that took the client's
	// connection; Site is the upstream's own site, which may be another).
	From string `json:"from"`
}

// UpstreamHandler answers every request with an Answer naming the site,
// region and upstream (GET /healthz: 200 "ok").
func UpstreamHandler(site, region, name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		_ = json.NewEncoder(w).Encode(Answer{Site: site, Region: region, Upstream: name,
			Method: r.Method, Path: r.URL.Path, RequestID: r.Header.Get("X-Request-Id"), Tenant: r.Header.Get("X-Rampart-Tenant"), From: remoteIP(r.RemoteAddr)})
	})
}

// ServeUpstream is `rampart lab upstream`: serves UpstreamHandler on addr
// until ctx ends.
func ServeUpstream(ctx context.Context, addr, site, region, name string) error {
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("lab upstream %s on %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: UpstreamHandler(site, region, name), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("lab upstream %s: %w", name, err)
	}
	return nil
}

func remoteIP(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
