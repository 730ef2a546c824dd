package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
	"github.com/rampart-edge/rampart/control/revision"
)

const maxSmallBody = 1 << 20

func (a *API) leader(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, a.p.Leader())
}

func (a *API) submit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, revision.MaxBodyBytes))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rev, created, err := a.p.Submit(r.Context(), plane.Submission{Body: body, ContentType: r.Header.Get("Content-Type"),
		IdempotencyKey: r.Header.Get("Idempotency-Key"), Message: r.URL.Query().Get("message")})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", "/v1/revisions/"+rev.ID)
	writeJSON(w, http.StatusCreated, rev)
}

// limit reads ?limit= (default 50, at most 1000).
func limit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 50, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		return 0, fmt.Errorf("%w: limit %q must be 1..1000", plane.ErrBadRequest, s)
	}
	return n, nil
}

func (a *API) revisions(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var before uint64
	if b := r.URL.Query().Get("before"); b != "" {
		if before, err = model.ParseRevisionID(b); err != nil {
			a.fail(w, r, fmt.Errorf("%w: before: %w", plane.ErrBadRequest, err))
			return
		}
	}
	revs, err := a.p.Revisions(r.Context(), before, n)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"revisions": nonNil(revs)})
}

func (a *API) revision(w http.ResponseWriter, r *http.Request) {
	d, err := a.p.Revision(r.Context(), r.PathValue("id"), r.URL.Query().Get("config") != "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) snapshot(w http.ResponseWriter, r *http.Request) {
	f, err := a.p.Snapshot(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(f)
}

func (a *API) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("from") == "" || q.Get("to") == "" {
		a.fail(w, r, fmt.Errorf("%w: from and to name the revisions to compare", plane.ErrBadRequest))
		return
	}
	d, err := a.p.Diff(r.Context(), q.Get("from"), q.Get("to"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) rollouts(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ros, err := a.p.Rollouts(r.Context(), r.URL.Query().Get("open") != "", n)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"rollouts": nonNil(ros), "stages": stageNames(a.p), "stage_bake_seconds": stageBakes(a.p)})
}

// stageBakes is each stage's bake in seconds, in stage order (the
// dashboard shows the bake time left from it).
func stageBakes(p *plane.Plane) []float64 {
	pol := p.Policy()
	out := make([]float64, len(pol.Stages))
	for i := range pol.Stages {
		out[i] = pol.BakeOf(i).Seconds()
	}
	return out
}

func stageNames(p *plane.Plane) []string {
	var out []string
	for _, s := range p.Policy().Stages {
		out = append(out, s.Name)
	}
	return out
}

func (a *API) rollout(w http.ResponseWriter, r *http.Request) {
	ro, err := a.p.Rollout(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ro)
}

// decode reads an optional small JSON body strictly.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSmallBody))
	if err != nil || len(body) == 0 {
		return err
	}
	if err := strictJSON(body, v); err != nil {
		return fmt.Errorf("%w: %v", plane.ErrBadRequest, err)
	}
	return nil
}

func (a *API) steer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	var ro *model.Rollout
	var err error
	switch r.PathValue("action") {
	case "pause":
		ro, err = a.p.Pause(r.Context(), id, req.Reason)
	case "resume":
		ro, err = a.p.Resume(r.Context(), id)
	case "abort":
		ro, err = a.p.Abort(r.Context(), id, req.Reason)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ro)
}

func (a *API) rollback(w http.ResponseWriter, r *http.Request) {
	var req struct {
		To      string `json:"to"`
		Staged  bool   `json:"staged"`
		Message string `json:"message"`
	}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.To == "" {
		a.fail(w, r, fmt.Errorf("%w: \"to\" names the revision to roll back to", plane.ErrBadRequest))
		return
	}
	rev, err := a.p.Rollback(r.Context(), req.To, req.Staged, req.Message)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, rev)
}

func (a *API) fleet(w http.ResponseWriter, r *http.Request) {
	f, err := a.p.Fleet(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rv, err := a.regionsView(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fleetView{FleetView: f, Refused: a.refused.list(), Regions: rv.Regions})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytesReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}
