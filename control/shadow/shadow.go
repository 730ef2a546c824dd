// Package shadow compares the route decisions of two configs on a corpus
// of requests generated from both configs' templates: each route's host
// (a wildcard filled in), its template with sample parameter values, and
// every common method. A difference is "expected" when a route that was
// added, removed or changed matches the request's path in either config;
// other differences (a global setting that moved requests between
// unchanged routes, say) are "unexpected", and so are requests a changed
// route served before that now get 404 or 405 (a typo'd path).
package shadow

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/revision"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Methods are tried on every generated path.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Request is one corpus entry.
type Request struct{ Host, Method, Path string }

// side is one config ready for lookups.
type side struct {
	cfg    *snapshot.Config
	table  *route.Table
	policy route.SlashPolicy
}

func newSide(c *snapshot.Config) (side, error) {
	if c == nil {
		c = &snapshot.Config{}
	}
	t, err := route.NewTable(c.Routes)
	if err != nil {
		return side{}, fmt.Errorf("shadow: route table: %w", err)
	}
	p := route.RejectEncodedSlashes
	if c.Routing.EncodedSlashes == "decode" {
		p = route.DecodeEncodedSlashes
	}
	return side{c, t, p}, nil
}

// decide is the route id for a request, or the status when none matched.
func (s side) decide(r Request) string {
	path, err := route.NormalizePath(r.Path, s.policy)
	if err != nil {
		return "400"
	}
	var m route.Match
	s.table.Lookup(route.NormalizeHost(r.Host), r.Method, path, &m)
	if m.Status != 200 {
		return strconv.Itoa(m.Status)
	}
	return s.cfg.Routes[m.Route].ID
}

// Check compares old (nil: no baseline, every request 404s) with new and
// lists up to maxListed differences, unexpected ones first.
func Check(old, new *snapshot.Config, baseline string, maxListed int) (*model.ShadowReport, error) {
	start := time.Now()
	o, err := newSide(old)
	if err != nil {
		return nil, err
	}
	n, err := newSide(new)
	if err != nil {
		return nil, err
	}
	expl, err := explainer(o.cfg, n.cfg)
	if err != nil {
		return nil, err
	}
	rep := &model.ShadowReport{Baseline: baseline, Listed: []model.Difference{}}
	var unexpected, expected []model.Difference
	for _, r := range Corpus(o.cfg, n.cfg) {
		rep.Requests++
		a, b := o.decide(r), n.decide(r)
		if a == b {
			continue
		}
		rep.Differences++
		d := model.Difference{Host: r.Host, Method: r.Method, Path: r.Path, Old: a, New: b, Expected: expl(r, a, b)}
		if !d.Expected {
			rep.Unexpected++
			if len(unexpected) < maxListed {
				unexpected = append(unexpected, d)
			}
		} else if len(expected) < maxListed {
			expected = append(expected, d)
		}
	}
	rep.Listed = append(rep.Listed, unexpected...)
	rep.Listed = append(rep.Listed, expected...)
	if len(rep.Listed) > maxListed {
		rep.Listed = rep.Listed[:maxListed]
	}
	rep.ElapsedMs = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

// explainer returns whether a difference (the request, its old and new
// decisions) is expected: its path matches, in either config, a route
// that the diff says was added, removed or changed — unless a changed
// route (in both configs) served it before and now it gets 404 or 405:
// a change that stops serving what the route served (a typo'd path, a
// lost method) is unexpected; only removing the route says so on purpose.
func explainer(old, new *snapshot.Config) (func(r Request, a, b string) bool, error) {
	d := revision.Diff(old, new)
	changed, kept := map[string]bool{}, map[string]bool{}
	for _, id := range append(append([]string{}, d.Added...), d.Removed...) {
		changed[id] = true
	}
	for _, c := range d.Changed {
		changed[c.ID] = true
		kept[c.ID] = true
	}
	pick := func(c *snapshot.Config) (side, error) {
		var rs []snapshot.Route
		for _, r := range c.Routes {
			if changed[r.ID] {
				rs = append(rs, r)
			}
		}
		return newSide(&snapshot.Config{Routing: c.Routing, Routes: rs})
	}
	so, err := pick(old)
	if err != nil {
		return nil, err
	}
	sn, err := pick(new)
	if err != nil {
		return nil, err
	}
	return func(r Request, was, now string) bool {
		if kept[was] && (now == "404" || now == "405") {
			return false
		}
		a, b := so.decide(r), sn.decide(r)
		return (a != "404" && a != "400") || (b != "404" && b != "400")
	}, nil
}

// Corpus generates the requests for two configs: for every route of
// either, its host and a path from its template (and, for templates with
// parameters, one whose values hold an encoded slash), with every
// method of Methods and the route's own; plus "/" on every host. Sorted,
// no duplicates.
func Corpus(cfgs ...*snapshot.Config) []Request {
	type hp struct{ host, path string }
	paths := map[hp]bool{}
	extra := map[Request]bool{}
	for _, c := range cfgs {
		for _, r := range c.Routes {
			h := sampleHost(r.Host)
			paths[hp{h, "/"}] = true
			t, err := snapshot.ParseTemplate(r.PathTemplate)
			if err != nil {
				continue
			}
			p := samplePath(t, "sample-")
			paths[hp{h, p}] = true
			if len(t.Params()) > 0 { // an encoded slash: routing.encoded_slashes decides
				paths[hp{h, samplePath(t, "x%2F")}] = true
			}
			for _, m := range r.Methods {
				extra[Request{h, m, p}] = true
			}
		}
	}
	out := make([]Request, 0, len(paths)*len(Methods)+len(extra))
	for k := range paths {
		for _, m := range Methods {
			out = append(out, Request{k.host, m, k.path})
			delete(extra, Request{k.host, m, k.path})
		}
	}
	for r := range extra {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Method < b.Method
	})
	return out
}

func sampleHost(h string) string {
	switch {
	case h == "*" || h == "":
		return "any-host.shadow.invalid"
	case strings.HasPrefix(h, "*."):
		return "shadow" + h[1:]
	}
	return h
}

// samplePath fills a template's parameters with prefix+name.
func samplePath(t snapshot.Template, prefix string) string {
	if len(t.Segments) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range t.Segments {
		b.WriteByte('/')
		switch s.Kind {
		case snapshot.Literal:
			b.WriteString(s.Text)
		case snapshot.Param:
			b.WriteString(prefix + s.Text)
		case snapshot.Rest:
			b.WriteString(prefix + s.Text + "/more")
		}
	}
	return b.String()
}
