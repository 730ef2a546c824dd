package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rampart-edge/rampart/control/model"
)

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func row(tw io.Writer, cols ...any) {
	s := make([]string, len(cols))
	for i, c := range cols {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(tw, strings.Join(s, "\t"))
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func renderRevisions(w io.Writer, revs []model.Revision) {
	tw := table(w)
	row(tw, "REVISION", "VERSION", "KIND", "SOURCE", "ROUTES", "CLUSTERS", "CREATED", "MESSAGE")
	for _, r := range revs {
		row(tw, r.ID, r.Version, r.Kind, r.Source, r.Routes, r.Clusters, when(r.CreatedAt), r.Message)
	}
	_ = tw.Flush()
}

// state is a rollout's state with what holds it: paused, queued.
func state(ro *Rollout) string {
	s := ro.State
	if ro.Paused {
		s += " (paused)"
	}
	if ro.QueuedBehind != "" {
		s += " (queued behind " + ro.QueuedBehind + ")"
	}
	return s
}

func stageName(ro *Rollout) string {
	if ro.Stage < 0 || len(ro.Stages) == 0 {
		return ""
	}
	return ro.Stages[len(ro.Stages)-1].Name
}

func renderRollouts(w io.Writer, ros []Rollout) {
	tw := table(w)
	row(tw, "REVISION", "VERSION", "STATE", "STAGE", "PHASE", "BASELINE", "UPDATED", "REASON")
	for i := range ros {
		ro := &ros[i]
		why := ro.Reason
		if ro.Paused {
			why = ro.PauseReason
		}
		row(tw, ro.Revision, ro.Version, state(ro), stageName(ro), ro.Phase, ro.Baseline, when(ro.UpdatedAt), why)
	}
	_ = tw.Flush()
}

func renderRollout(w io.Writer, ro *Rollout) {
	tw := table(w)
	row(tw, "revision:", ro.Revision+" (version "+ro.Version.String()+")")
	row(tw, "state:", state(ro))
	if ro.Paused {
		row(tw, "paused:", ro.PauseReason)
	}
	if ro.Phase != "" {
		row(tw, "phase:", fmt.Sprintf("%s %s since %s", stageName(ro), ro.Phase, when(ro.PhaseSince)))
	}
	row(tw, "baseline:", ro.Baseline)
	if ro.Reason != "" {
		row(tw, "reason:", ro.Reason)
	}
	if ro.RolledBackTo != "" {
		row(tw, "rolled back to:", ro.RolledBackTo)
	}
	if sh := ro.Shadow; sh != nil {
		row(tw, "shadow check:", fmt.Sprintf("%d requests, %d differences, %d unexpected", sh.Requests, sh.Differences, sh.Unexpected))
	}
	_ = tw.Flush()
	if len(ro.Stages) > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		row(tw, "STAGE", "NODES", "OPENED", "ACTIVE", "DONE", "RESULT", "HEALTH")
		for _, s := range ro.Stages {
			h := ""
			if s.Health != nil {
				h = s.Health.Verdict
				if s.Health.VerdictExplained != "" && s.Health.Verdict != "ok" {
					h += ": " + s.Health.VerdictExplained
				}
			}
			row(tw, s.Name, strings.Join(s.Nodes, ","), when(s.OpenedAt), when(s.ActiveAt), when(s.DoneAt), s.Result, h)
		}
		_ = tw.Flush()
	}
	if sh := ro.Shadow; sh != nil && sh.Unexpected > 0 {
		fmt.Fprintln(w)
		tw = table(w)
		row(tw, "UNEXPECTED", "HOST", "PATH", "OLD", "NEW")
		for _, d := range sh.Listed {
			if !d.Expected {
				row(tw, d.Method, d.Host, d.Path, d.Old, d.New)
			}
		}
		_ = tw.Flush()
	}
}

func renderFleet(w io.Writer, f *Fleet) {
	fmt.Fprintf(w, "stable: %s (version %s)", dash(f.Stable), f.StableVersion)
	if f.Rolling != "" {
		fmt.Fprintf(w, "; rolling: %s", f.Rolling)
	}
	fmt.Fprintln(w)
	tw := table(w)
	row(tw, "NODE", "REGION", "ZONE", "COHORT", "STAGE", "ACTIVE", "ASSIGNED", "CONVERGED", "LIVE", "READY", "ERROR-RATE", "SEEN", "REFUSED")
	for _, n := range f.Nodes {
		refused := fmt.Sprint(n.Refused)
		if n.RefusedReason != "" {
			refused += " (" + n.RefusedVersion.String() + ": " + n.RefusedReason + ")"
		}
		row(tw, n.NodeID, n.Region, n.Zone, n.Cohort, n.Stage, n.Active, n.Assigned, yes(n.Converged), yes(n.Live), yes(n.Ready),
			fmt.Sprintf("%.4f", n.ErrorRate), fmt.Sprintf("%.0fs ago", n.AgeSeconds), refused)
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func renderDiff(w io.Writer, d *model.Diff) {
	fmt.Fprintf(w, "diff %s → %s\n", d.From, d.To)
	n := 0
	line := func(format string, args ...any) { n++; fmt.Fprintf(w, format+"\n", args...) }
	for _, id := range d.Added {
		line("+ route %s", id)
	}
	for _, id := range d.Removed {
		line("- route %s", id)
	}
	for _, c := range d.Changed {
		for _, f := range c.Fields {
			line("~ route %s: %s: %s → %s", c.ID, f.Field, compact(f.Old), compact(f.New))
		}
	}
	for _, id := range d.Clusters.Added {
		line("+ cluster %s", id)
	}
	for _, id := range d.Clusters.Removed {
		line("- cluster %s", id)
	}
	for _, id := range d.Clusters.Changed {
		line("~ cluster %s", id)
	}
	for _, s := range d.Sections {
		line("~ section %s", s)
	}
	if n == 0 {
		fmt.Fprintln(w, "no differences")
	}
}

func compact(v any) string {
	if v == nil {
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func renderDeny(w io.Writer, raw []byte) error {
	var d model.DenyState
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decode the deny list: %w", err)
	}
	fmt.Fprintf(w, "deny list sequence %d, %d entries\n", d.Sequence, len(d.Entries))
	if len(d.Entries) == 0 {
		return nil
	}
	tw := table(w)
	row(tw, "KIND", "VALUE", "EXPIRES", "ADDED", "REASON")
	for _, e := range d.Entries {
		row(tw, e.Kind, e.Value, when(e.ExpiresAt), when(e.AddedAt), e.Reason)
	}
	return tw.Flush()
}

func renderNodes(w io.Writer, ns []EnrolledNode) {
	tw := table(w)
	row(tw, "NODE", "ENROLLED", "REVOKED", "LAST-SEEN")
	for _, n := range ns {
		row(tw, n.ID, when(n.EnrolledAt), when(n.RevokedAt), when(n.LastSeen))
	}
	_ = tw.Flush()
}
