package routecheck

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/region"
	"github.com/rampart-edge/rampart/l7/route"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Checker holds what the proxy builds from one snapshot and one region
// state: the route table and the regional view.
type Checker struct {
	cfg     *snapshot.Config
	table   *route.Table
	slashes route.SlashPolicy
	policy  *region.Policy
	view    *region.View
}

// New compiles cfg as `snapshot build` does (normalise, validate) and
// builds the proxy's route table and regional policy under state s (nil:
// none). now is when the decisions are taken: it ages the state's signals.
func New(cfg *snapshot.Config, s *regionstate.State, now time.Time) (*Checker, error) {
	if _, err := snapshot.Compile(cfg); err != nil {
		return nil, err
	}
	t, err := route.NewTable(cfg.Routes)
	if err != nil {
		return nil, fmt.Errorf("route table: %w", err)
	}
	c := &Checker{cfg: cfg, table: t}
	if cfg.Routing.EncodedSlashes == "decode" {
		c.slashes = route.DecodeEncodedSlashes
	}
	if c.policy, err = region.Compile(cfg); err != nil {
		return nil, fmt.Errorf("regional policy: %w", err)
	}
	if c.policy != nil {
		c.view = region.NewTracker(func() time.Time { return now }).View(c.policy, s)
	}
	return c, nil
}

// Result is one case's outcome.
type Result struct {
	Case       Case
	Route      string // route id, or 404/405
	Target     string // region, 503, or - (no regional decision)
	Reason     string // reason code, or -
	Candidates string
	Problem    string // why the case failed; "" when it passed
}

// Pass reports whether the outcome matched the case's expectation.
func (r *Result) Pass() bool { return r.Problem == "" }

// Run decides every case at now. An error names the case whose request
// cannot be built (a bad host or path): that is bad input, not a mismatch.
func (c *Checker) Run(cases []Case, now time.Time) ([]Result, error) {
	out := make([]Result, 0, len(cases))
	for _, cs := range cases {
		r, err := c.run(cs, now)
		if err != nil {
			return nil, fmt.Errorf("case %q: %w", cs.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (c *Checker) run(cs Case, now time.Time) (Result, error) {
	res := Result{Case: cs, Target: "-", Reason: "-"}
	host, _, err := route.ParseAuthority(cs.Host, 443)
	if err != nil {
		return res, fmt.Errorf("host %q: %w", cs.Host, err)
	}
	raw, query, hasQuery := strings.Cut(cs.Path, "?")
	if hasQuery && cs.Query != "" {
		return res, fmt.Errorf("path %q has a query and the case sets query too", cs.Path)
	}
	if cs.Query != "" {
		query = cs.Query
	}
	if err := route.CheckQuery(query); err != nil {
		return res, fmt.Errorf("query %q: %w", query, err)
	}
	path, err := route.NormalizePath(raw, c.slashes)
	if err != nil {
		return res, fmt.Errorf("path %q: %w", cs.Path, err)
	}
	rq := route.Request{Header: map[string][]string{}, Query: query}
	for k, v := range cs.Headers {
		key := http.CanonicalHeaderKey(k)
		rq.Header[key] = append(rq.Header[key], v)
	}
	var m route.Match
	c.table.LookupRequest(host, cs.Method, path, &rq, &m)
	if m.Status != http.StatusOK {
		res.Route = fmt.Sprint(m.Status)
	} else {
		rt := &c.cfg.Routes[m.Route]
		res.Route = rt.ID
		if rule := c.policy.Rule(rt.ID); rule != nil {
			in := region.Input{Tenant: cs.Tenant, Hint: header(cs.Headers, c.policy.HintHeader()),
				Local: c.policy.Index(cs.Region), Now: now.UnixNano(), Roll: cs.Roll}
			var d region.Decision
			c.view.Decide(rule, &in, &d)
			res.Reason, res.Candidates = d.Reason.String(), c.policy.Names(d.Candidates, "|")
			res.Target = "503"
			if d.Reason.OK() {
				res.Target = c.policy.Name(d.Target)
			}
		}
	}
	res.Problem = compare(cs.Expect, &res)
	return res, nil
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func compare(e Expect, r *Result) string {
	var diffs []string
	check := func(what, want, got string) {
		if want != "" && want != got {
			diffs = append(diffs, fmt.Sprintf("%s %s, want %s", what, orDash(got), want))
		}
	}
	check("route", e.Route, r.Route)
	check("target", e.Target, r.Target)
	check("reason", e.Reason, r.Reason)
	check("candidates", e.Candidates, r.Candidates)
	return strings.Join(diffs, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Write prints the results as a table and a summary line; it returns the
// number of failed cases.
func Write(w io.Writer, results []Result) (failed int, err error) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tROUTE\tTARGET\tREASON\tRESULT")
	for _, r := range results {
		verdict := "PASS"
		if !r.Pass() {
			verdict = "FAIL: " + r.Problem
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Case.Name, r.Route, r.Target, r.Reason, verdict)
	}
	if err := tw.Flush(); err != nil {
		return failed, fmt.Errorf("write results: %w", err)
	}
	_, err = fmt.Fprintf(w, "%d cases, %d passed, %d failed\n", len(results), len(results)-failed, failed)
	return failed, err
}
