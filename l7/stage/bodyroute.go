package stage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rampart-edge/rampart/l7/listener"
)

func init() { register(SlotBodyRoute, buildBodyRoute) }

// bodyRoute is the stage of a route with body_route: it reads the JSON
// body once (up to max_body_bytes, and the listener's max_body_bytes; each
// read bounded by the listener's request_body_timeout_ms), finds the field
// with jsonField, and hands the request, its body unchanged, to the route
// of the field's case (else the default route) through Env.Handoff, whose
// chain (auth, quota, header rules, forward) answers it.
type bodyRoute struct {
	field   string
	path    []string
	limit   int64
	cases   map[string]int32
	def     int32 // -1: none
	handoff func(*Exchange, int32)
	counts  *prometheus.CounterVec
	id      string
}

// bodyRoutesVec is rampart_body_route_total{route, outcome}: outcome is the
// chosen route's id, or the status the stage answered with.
func bodyRoutesVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rampart_body_route_total",
		Help: "Requests of body-routing routes, by route and outcome (the chosen route's id, or the status answered: 400, 408, 413, 415).",
	}, []string{"route", "outcome"})
}

func buildBodyRoute(r *Route, env *Env) (Stage, error) {
	br := r.Config.BodyRoute
	if br == nil {
		return nil, nil
	}
	if env.Handoff == nil {
		return nil, fmt.Errorf("handoff %w", errNotBuilt)
	}
	index := map[string]int32{}
	for i, rc := range env.Snap.Config.Routes {
		index[rc.ID] = int32(i)
	}
	s := &bodyRoute{field: br.Field, path: br.Path(), limit: br.Limit(), cases: map[string]int32{}, def: -1,
		handoff: env.Handoff, id: r.Config.ID}
	for v, id := range br.Cases {
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("case %q names unknown route %q", v, id)
		}
		s.cases[v] = i
	}
	if br.Default != "" {
		i, ok := index[br.Default]
		if !ok {
			return nil, fmt.Errorf("default names unknown route %q", br.Default)
		}
		s.def = i
	}
	s.counts = env.Metrics.Register(bodyRoutesVec()).(*prometheus.CounterVec)
	return s, nil
}

func (*bodyRoute) Name() string { return "body_route" }

func (s *bodyRoute) Serve(x *Exchange) Verdict {
	r := x.R
	if !jsonMediaType(r.Header.Get("Content-Type")) {
		return s.fail(x, http.StatusUnsupportedMediaType, "body routing needs a JSON body (Content-Type application/json or */*+json)")
	}
	limit := s.limit
	if l := x.Listener; l != nil && l.MaxBodyBytes >= 0 && l.MaxBodyBytes < limit {
		limit = l.MaxBodyBytes
	}
	if r.ContentLength > limit {
		return s.fail(x, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over the %d bytes body routing reads", limit))
	}
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		// One buffer of the announced size (io.ReadAll grows from 512 bytes
		// by doubling: ~5x the body in allocations at 64 KiB).
		size := int64(bytes.MinRead)
		if r.ContentLength > 0 {
			size += r.ContentLength
		}
		buf := bytes.NewBuffer(make([]byte, 0, size))
		_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
		body = buf.Bytes()
		switch {
		case listener.IsBodyTimeout(err):
			x.Log.Err = "client body: " + err.Error()
			return s.fail(x, http.StatusRequestTimeout, "request body not received within the listener's request_body_timeout_ms")
		case err != nil:
			x.Log.Err = "client body: " + err.Error()
			return s.fail(x, http.StatusBadRequest, "could not read the request body")
		case int64(len(body)) > limit:
			return s.fail(x, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over the %d bytes body routing reads", limit))
		}
	}
	target := s.def
	value, err := jsonField(body, s.path)
	if err == nil {
		if t, ok := s.cases[value]; ok {
			target = t
		}
	}
	if target < 0 {
		msg := "no body_route case for the value of " + s.field
		switch {
		case errors.Is(err, errNotJSON):
			msg = "request body is not JSON"
		case errors.Is(err, errFieldMissing):
			msg = "request body has no " + s.field + " (a string, number or boolean)"
		}
		return s.fail(x, http.StatusBadRequest, msg)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	s.handoff(x, target)
	s.counts.WithLabelValues(s.id, x.Route.ID).Inc()
	return Replied
}

func (s *bodyRoute) fail(x *Exchange, status int, msg string) Verdict {
	s.counts.WithLabelValues(s.id, strconv.Itoa(status)).Inc()
	return x.Fail(status, msg, FaultClient)
}

// jsonMediaType accepts application/json and any +json type, with
// parameters (charset).
func jsonMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
