// Package api is the control plane's HTTP JSON API over control/plane:
// operators submit and inspect revisions, steer rollouts and the deny
// channel, and enrol and revoke nodes; nodes long-poll for snapshots and
// deny lists and report their status. Every endpoint but /healthz needs a
// bearer token whose role allows it; a node speaks only for itself, with
// the token it was enrolled with (see control/README.md).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/control/store"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// API serves the control plane over HTTP.
type API struct {
	p      *plane.Plane
	tokens []Token
	log    *slog.Logger
	mux    *http.ServeMux

	refused refusals // node requests refused here

	eventEvery time.Duration // GET /v1/events: how often it compares (events.go)
}

// New returns the API handler; it refuses to exist without tokens.
func New(p *plane.Plane, tokens []Token, log *slog.Logger) (*API, error) {
	if len(tokens) == 0 {
		return nil, errors.New("api: no tokens configured: the control API is never open")
	}
	if log == nil {
		log = slog.Default()
	}
	a := &API{p: p, tokens: tokens, log: log, mux: http.NewServeMux()}
	for _, t := range tokens {
		if t.Role == RoleNode {
			log.Warn("a shared node token is configured (allow_shared_node_tokens): it speaks for every node that is not enrolled; enrol each node (POST /v1/nodes/{id}/enroll) and remove it",
				"token", t.Name)
		}
	}
	m := a.mux
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	m.HandleFunc("GET /v1/whoami", a.guard(RoleRead, a.whoami)) // events.go
	m.HandleFunc("GET /v1/events", a.guard(RoleRead, a.events)) // events.go
	m.HandleFunc("GET /v1/leader", a.guard(RoleRead, a.leader))
	m.HandleFunc("POST /v1/revisions", a.guard(RoleAdmin, a.submit))
	m.HandleFunc("GET /v1/revisions", a.guard(RoleRead, a.revisions))
	m.HandleFunc("GET /v1/revisions/{id}", a.guard(RoleRead, a.revision))
	m.HandleFunc("GET /v1/revisions/{id}/snapshot", a.guard(RoleRead, a.snapshot))
	m.HandleFunc("GET /v1/diff", a.guard(RoleRead, a.diff))
	m.HandleFunc("GET /v1/rollouts", a.guard(RoleRead, a.rollouts))
	m.HandleFunc("GET /v1/rollouts/{id}", a.guard(RoleRead, a.rollout))
	m.HandleFunc("POST /v1/rollouts/{id}/{action}", a.guard(RoleAdmin, a.steer))
	m.HandleFunc("POST /v1/rollback", a.guard(RoleAdmin, a.rollback))
	m.HandleFunc("GET /v1/fleet", a.guard(RoleRead, a.fleet))
	m.HandleFunc("GET /v1/deny", a.guard(RoleRead, a.denyList))
	m.HandleFunc("POST /v1/deny/entries", a.guard(RoleAdmin, a.denyAdd))
	m.HandleFunc("POST /v1/deny/expire", a.guard(RoleAdmin, a.denyExpire))
	m.HandleFunc("GET /v1/purge", a.guard(RoleRead, a.purgeList))  // purge.go
	m.HandleFunc("POST /v1/purge", a.guard(RoleAdmin, a.purgeAdd)) // purge.go
	m.HandleFunc("GET /v1/node/purge", a.nodeGuard(a.watchPurge))  // purge.go
	m.HandleFunc("POST /v1/nodes/{id}/enroll", a.guard(RoleAdmin, a.enroll))
	m.HandleFunc("POST /v1/nodes/{id}/revoke", a.guard(RoleAdmin, a.revoke))
	m.HandleFunc("GET /v1/nodes", a.guard(RoleRead, a.enrolled))
	m.HandleFunc("GET /v1/regions", a.guard(RoleRead, a.regions))
	m.HandleFunc("POST /v1/regions/{region}/drain", a.guard(RoleAdmin, a.drainRegion))
	m.HandleFunc("POST /v1/regions/{region}/undrain", a.guard(RoleAdmin, a.undrainRegion))
	m.HandleFunc("GET /v1/platforms", a.guard(RoleRead, a.platforms))
	m.HandleFunc("GET /v1/quota/leases", a.guard(RoleRead, a.quotaLeases)) // leases.go
	m.HandleFunc("POST /v1/platforms/{platform}/lag", a.guard(RoleMonitor, a.pushLag))
	m.HandleFunc("POST /v1/platforms/{platform}/writer", a.guard(RoleAdmin, a.setWriter))
	m.HandleFunc("GET /v1/node/regionstate", a.nodeGuard(a.watchRegionState))
	m.HandleFunc("GET /v1/node/snapshot", a.nodeGuard(a.watchSnapshot))
	m.HandleFunc("GET /v1/node/deny", a.nodeGuard(a.watchDeny))
	m.HandleFunc("POST /v1/node/status", a.nodeGuard(a.report))
	return a, nil
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

type errorBody struct {
	Error    string   `json:"error"`
	Problems []string `json:"problems,omitempty"`
	Leader   string   `json:"leader,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// fail maps an error to a status: validation problems and bad requests
// 400, unknown things 404, conflicts 409, writes on an instance without
// the lease 503 (fail closed; retry on the leader), the rest 500.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ve *snapshot.ValidationError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ve):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "config is invalid", Problems: ve.Problems})
	case errors.As(err, &mbe):
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: err.Error()})
	case errors.Is(err, plane.ErrBadRequest):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, store.ErrConflict):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
	case errors.Is(err, store.ErrNotLeader):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error(), Leader: a.p.Leader().Holder})
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
	default:
		a.log.Error("control api", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
	}
}
