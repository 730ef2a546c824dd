package api

import (
	"context"
	"net/http"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
)

// HeaderPurgeVersion names the purge document's version on GET /v1/node/purge.
const HeaderPurgeVersion = "X-Rampart-Purge-Version"

// purgeAdd is POST /v1/purge: {"route", "prefix", "surrogate_key"}, at
// least one; 200 with the rule and the document's sequence.
func (a *API) purgeAdd(w http.ResponseWriter, r *http.Request) {
	var req plane.PurgeRequest
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.p.AddPurge(r.Context(), req, who(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// purgeList is GET /v1/purge: the rules the document lists and its sequence.
func (a *API) purgeList(w http.ResponseWriter, r *http.Request) {
	s, err := a.p.Purge(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// watchPurge is the node long-poll GET /v1/node/purge?node=&version=E.S.
func (a *API) watchPurge(w http.ResponseWriter, r *http.Request) {
	a.serveWatch(w, r, HeaderPurgeVersion, func(ctx context.Context, q model.WatchQuery) (string, []byte, error) {
		v, file, err := a.p.WatchPurge(ctx, q)
		return v.String(), file, err
	})
}
