package api

import (
	"net/http"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
)

// enroll issues a node its own token: 201 {id, token, enrolled_at}; the
// token is shown this once. An enrolled id is rotated.
func (a *API) enroll(w http.ResponseWriter, r *http.Request) {
	e, err := a.p.Enroll(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, e)
}

// revoke withdraws a node's token: 204, 404 when never enrolled.
func (a *API) revoke(w http.ResponseWriter, r *http.Request) {
	if err := a.p.Revoke(r.Context(), r.PathValue("id")); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// enrolled lists the node credentials: {"nodes": [{id, enrolled_at,
// revoked_at?, last_seen?}]}.
func (a *API) enrolled(w http.ResponseWriter, r *http.Request) {
	ns, err := a.p.EnrolledNodes(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nonNil(ns)})
}

// fleetView is the plane's fleet view with this instance's refused node
// requests: ids that tried to report or watch without the right to.
type fleetView struct {
	*plane.FleetView
	Refused []Refusal            `json:"refused"`
	Regions []model.RegionHealth `json:"regions"`
}
