package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/rampart-edge/rampart/control/model"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Response headers of the node endpoints.
const (
	HeaderRevision = "X-Rampart-Revision"
	HeaderVersion  = "X-Rampart-Version"
	HeaderSequence = "X-Rampart-Deny-Sequence"
)

func (a *API) watchSnapshot(w http.ResponseWriter, r *http.Request) {
	q, err := model.ParseWatchQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	if !a.speaksFor(w, r, q.NodeID) {
		return
	}
	o, err := a.p.WatchSnapshot(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if o == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderRevision, o.Revision)
	w.Header().Set(HeaderVersion, o.Version.String())
	_, _ = w.Write(o.File)
}

func (a *API) watchDeny(w http.ResponseWriter, r *http.Request) {
	a.serveWatch(w, r, HeaderSequence, func(ctx context.Context, q model.WatchQuery) (string, []byte, error) {
		seq, file, err := a.p.WatchDeny(ctx, q)
		return strconv.FormatUint(seq, 10), file, err
	})
}

// serveWatch answers a node's long-poll for a signed document: the query
// and the node's identity checked, then the document with its version in
// header, or 204 when the node's copy is current.
func (a *API) serveWatch(w http.ResponseWriter, r *http.Request, header string,
	watch func(context.Context, model.WatchQuery) (string, []byte, error)) {
	q, err := model.ParseWatchQuery(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	if !a.speaksFor(w, r, q.NodeID) {
		return
	}
	version, file, err := watch(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if file == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(header, version)
	_, _ = w.Write(file)
}

func (a *API) report(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var s model.Status // unknown fields allowed: nodes may be upgraded first
	if err := json.Unmarshal(body, &s); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "status report: " + err.Error()})
		return
	}
	if !a.speaksFor(w, r, s.NodeID) {
		return
	}
	if err := a.p.Report(r.Context(), s); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) denyList(w http.ResponseWriter, r *http.Request) {
	d, err := a.p.Deny(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) denyAdd(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<20))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.p.AddDeny(r.Context(), body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) denyExpire(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Kind  string `json:"kind"`
		Value string `json:"value"`
	}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.p.ExpireDeny(r.Context(), req.Kind, req.Value)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
