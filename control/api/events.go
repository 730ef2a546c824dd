package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// EventKinds are the kinds GET /v1/events reports a change of, in the
// order a change event lists them.
var EventKinds = []string{"fleet", "rollouts", "regions", "deny"}

// whoamiView is GET /v1/whoami: the calling token's name and role, and
// whether it may steer (the dashboard shows write buttons only then).
type whoamiView struct {
	Name  string `json:"name"`
	Role  Role   `json:"role"`
	Write bool   `json:"write"`
}

func (a *API) whoami(w http.ResponseWriter, r *http.Request) {
	p, _ := r.Context().Value(principalKey{}).(principal)
	writeJSON(w, http.StatusOK, whoamiView{Name: p.name, Role: p.role, Write: allowed(p.role, RoleAdmin)})
}

// changeEvent is the data of one server-sent "change" event.
type changeEvent struct {
	Seq   uint64   `json:"seq"`
	Kinds []string `json:"kinds"`
}

// SetEventInterval sets how often GET /v1/events compares the state
// (default 500 ms; bounds 50 ms to 10 s). Call it before serving.
func (a *API) SetEventInterval(d time.Duration) error {
	if d < 50*time.Millisecond || d > 10*time.Second {
		return fmt.Errorf("api: event interval %s is out of bounds (50ms to 10s)", d)
	}
	a.eventEvery = d
	return nil
}

// events is GET /v1/events, a text/event-stream: an event "change" with
// {"seq":N,"kinds":[...]} at once (every kind) and then whenever the
// fleet, the rollouts, the regions (and platforms) or the deny list differ
// from the last look; a comment every 15 s keeps proxies from closing it.
// It compares fingerprints (SHA-256 of the views the API serves, report
// ages left out) every interval rather than hooking every write path of
// the plane: one read of each view per interval per open stream, which a
// handful of operator pages afford, and no write path can forget to tell.
func (a *API) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "events: the connection cannot stream"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	every := a.eventEvery
	if every == 0 {
		every = 500 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	ctx := r.Context()
	var seq uint64
	prev := map[string][32]byte{}
	for {
		cur, err := a.fingerprints(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("control api: events: read the state", "err", err)
		}
		var kinds []string
		for _, k := range EventKinds {
			if sum, ok := cur[k]; ok && (prev[k] != sum || seq == 0) {
				kinds = append(kinds, k)
				prev[k] = sum
			}
		}
		if len(kinds) > 0 {
			seq++
			data, _ := json.Marshal(changeEvent{Seq: seq, Kinds: kinds})
			if _, err := fmt.Fprintf(w, "id: %d\nevent: change\ndata: %s\n\n", seq, data); err != nil {
				return
			}
			fl.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-tick.C:
		}
	}
}

// fingerprints hashes each kind's view; a kind whose read failed is left
// out (its last fingerprint stands) and the first error returned.
func (a *API) fingerprints(ctx context.Context) (map[string][32]byte, error) {
	out := map[string][32]byte{}
	var first error
	put := func(kind string, v any, err error) {
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", kind, err)
			}
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", kind, err)
			}
			return
		}
		out[kind] = sha256.Sum256(b)
	}
	f, err := a.p.Fleet(ctx)
	if err == nil {
		for i := range f.Nodes {
			f.Nodes[i].AgeSeconds = 0 // grows by itself; SeenAt says a report came
		}
	}
	put("fleet", []any{f, a.refused.list()}, err)
	ros, err := a.p.Rollouts(ctx, false, 20)
	put("rollouts", ros, err)
	hs, err := a.p.Regions(ctx)
	if err == nil {
		var ps any
		ps, err = a.p.Platforms(ctx)
		put("regions", []any{hs, ps}, err)
	} else {
		put("regions", nil, err)
	}
	d, err := a.p.Deny(ctx)
	put("deny", d, err)
	return out, first
}
