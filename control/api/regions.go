package api

import (
	"context"
	"net/http"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
)

// HeaderRegionStateVersion names the version of a region-state document.
const HeaderRegionStateVersion = "X-Rampart-Region-State-Version"

type regionsView struct {
	Regions []model.RegionHealth `json:"regions"`
	// Document is the version and creation time of the last region-state
	// document this instance composed (absent on a follower).
	Document *documentInfo `json:"document,omitempty"`
}

type documentInfo struct {
	Version envelope.Version `json:"version"`
	Created time.Time        `json:"created"`
}

func (a *API) regionsView(r *http.Request) (*regionsView, error) {
	hs, err := a.p.Regions(r.Context())
	if err != nil {
		return nil, err
	}
	v := &regionsView{Regions: nonNil(hs)}
	if s, _ := a.p.RegionState(); s != nil {
		v.Document = &documentInfo{Version: s.Version, Created: s.Created}
	}
	return v, nil
}

func (a *API) regions(w http.ResponseWriter, r *http.Request) {
	v, err := a.regionsView(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *API) drainRegion(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.p.DrainRegion(r.Context(), r.PathValue("region"), req.Reason, who(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) undrainRegion(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.p.UndrainRegion(r.Context(), r.PathValue("region"), who(r)); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"region": r.PathValue("region"), "draining": "false"})
}

func (a *API) platforms(w http.ResponseWriter, r *http.Request) {
	ps, err := a.p.Platforms(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"platforms": ps})
}

func (a *API) pushLag(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Lags []model.ReplicaLag `json:"lags"`
	}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	for i := range req.Lags {
		req.Lags[i].PushedAt = time.Time{}
	}
	if err := a.p.PushLag(r.Context(), r.PathValue("platform"), req.Lags); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) setWriter(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Region        string  `json:"region"`
		ExpectedEpoch *uint64 `json:"expected_epoch"`
	}
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	pw, err := a.p.SetWriter(r.Context(), r.PathValue("platform"), req.Region, req.ExpectedEpoch, who(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pw)
}

func (a *API) watchRegionState(w http.ResponseWriter, r *http.Request) {
	a.serveWatch(w, r, HeaderRegionStateVersion, func(ctx context.Context, q model.WatchQuery) (string, []byte, error) {
		v, file, err := a.p.WatchRegionState(ctx, envelope.Version(q.Version), q)
		return v.String(), file, err
	})
}
