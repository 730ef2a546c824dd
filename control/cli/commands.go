package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func submit(ctx context.Context, c *cmd, args []string) error {
	file := c.fs.String("f", "", "config file to submit (YAML, or JSON for *.json); - reads stdin")
	msg := c.fs.String("message", "", "what the revision is for (shown in revisions)")
	key := c.fs.String("idempotency-key", "", "the same key again returns the same revision instead of a new one")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(0, 0, "-f FILE [-message M]"); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("submit: -f FILE is required (- for stdin)")
	}
	var body []byte
	var err error
	if *file == "-" {
		body, err = io.ReadAll(c.env.Stdin)
	} else {
		body, err = os.ReadFile(*file)
	}
	if err != nil {
		return fmt.Errorf("submit: read the config: %w", err)
	}
	ctype := "application/yaml"
	if strings.EqualFold(filepath.Ext(*file), ".json") {
		ctype = "application/json"
	}
	var raw []byte
	rev, err := c.client.Submit(ctx, body, ctype, *msg, *key, &raw)
	if err != nil {
		return err
	}
	if c.json() {
		return printRaw(c.env.Stdout, raw)
	}
	fmt.Fprintf(c.env.Stdout, "revision %s created: version %s, %d routes, %d clusters, %d-byte snapshot; its rollout is pending\n",
		rev.ID, rev.Version, rev.Routes, rev.Clusters, rev.SnapshotBytes)
	fmt.Fprintf(c.env.Stdout, "follow it with: rampart control rollout status %s\n", rev.ID)
	return nil
}

func diff(ctx context.Context, c *cmd, args []string) error {
	from := c.fs.String("from", "", "compare with this revision (default: the rollout's baseline, else the stable revision)")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(1, 1, "REV [-from REV]"); err != nil {
		return err
	}
	to := c.args[0]
	if *from == "" {
		d, err := c.client.Revision(ctx, to, nil)
		if err != nil {
			return err
		}
		if d.Rollout != nil && d.Rollout.Baseline != "" {
			*from = d.Rollout.Baseline
		} else {
			f, err := c.client.Fleet(ctx, nil)
			if err != nil {
				return err
			}
			*from = f.Stable
		}
		if *from == "" || *from == to {
			return fmt.Errorf("diff %s: no baseline or other stable revision to compare with; give -from REV", to)
		}
	}
	var raw []byte
	d, err := c.client.Diff(ctx, *from, to, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { renderDiff(w, d) })
}

func rollout(ctx context.Context, env Env, args []string) error {
	verb, rest, err := sub("rollout", args, "status", "pause", "resume", "abort")
	if err != nil {
		return err
	}
	c := newCmd("rollout "+verb, env)
	if verb == "status" {
		wait := c.fs.Bool("wait", false, "with REV: wait until the rollout ends (like kubectl rollout status); exit 1 unless it is done")
		timeout := c.fs.Duration("timeout", 30*time.Minute, "with -wait: give up after this long")
		if err := c.parse(rest); err != nil {
			return err
		}
		if err := c.want(0, 1, "[REV [-wait [-timeout D]]]"); err != nil {
			return err
		}
		var raw []byte
		if *wait {
			if len(c.args) != 1 {
				return fmt.Errorf("rollout status -wait: name the revision")
			}
			return waitRollout(ctx, c, c.args[0], *timeout)
		}
		if len(c.args) == 1 {
			ro, err := c.client.Rollout(ctx, c.args[0], &raw)
			if err != nil {
				return err
			}
			return c.show(raw, func(w io.Writer) { renderRollout(w, ro) })
		}
		ros, err := c.client.Rollouts(ctx, true, 1000, &raw)
		if err == nil && len(ros) == 0 { // nothing open: the newest
			ros, err = c.client.Rollouts(ctx, false, 1, &raw)
		}
		if err != nil {
			return err
		}
		return c.show(raw, func(w io.Writer) { renderRollouts(w, ros) })
	}
	reason := c.fs.String("reason", "", "why (kept in the rollout record)")
	if err := c.parse(rest); err != nil {
		return err
	}
	if err := c.want(1, 1, "REV [-reason R]"); err != nil {
		return err
	}
	if verb == "resume" && *reason != "" {
		return fmt.Errorf("rollout resume: -reason is for pause and abort")
	}
	var raw []byte
	ro, err := c.client.Steer(ctx, c.args[0], verb, *reason, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { renderRollout(w, ro) })
}

// waitRollout follows a rollout until it ends, printing each change of
// state, stage or phase; an end other than done is an error.
func waitRollout(ctx context.Context, c *cmd, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		var raw []byte
		ro, err := c.client.Rollout(ctx, id, &raw)
		if err != nil {
			return err
		}
		if now := state(ro) + " " + stageName(ro) + " " + ro.Phase; now != last && !c.json() {
			fmt.Fprintf(c.env.Stdout, "%s  %s %s\n", time.Now().UTC().Format("15:04:05"), id, strings.Join(strings.Fields(now), " "))
			last = now
		}
		if !ro.Open() {
			if c.json() {
				if err := printRaw(c.env.Stdout, raw); err != nil {
					return err
				}
			} else {
				renderRollout(c.env.Stdout, ro)
			}
			if ro.State != "done" {
				return fmt.Errorf("rollout %s %s: %s", id, ro.State, ro.Reason)
			}
			return nil
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("rollout %s still %s after %s", id, state(ro), timeout)
		case <-t.C:
		}
	}
}

func revisions(ctx context.Context, c *cmd, args []string) error {
	limit := c.fs.Int("limit", 20, "how many (1..1000)")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(0, 0, "[-limit N]"); err != nil {
		return err
	}
	var raw []byte
	revs, err := c.client.Revisions(ctx, *limit, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { renderRevisions(w, revs) })
}

func fleet(ctx context.Context, c *cmd, args []string) error {
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(0, 0, ""); err != nil {
		return err
	}
	var raw []byte
	f, err := c.client.Fleet(ctx, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { renderFleet(w, f) })
}

func denyCmd(ctx context.Context, env Env, args []string) error {
	verb, rest, err := sub("deny", args, "list", "add", "remove")
	if err != nil {
		return err
	}
	c := newCmd("deny "+verb, env)
	var file, reason *string
	var ttl *time.Duration
	if verb == "add" {
		file = c.fs.String("f", "", "YAML or JSON list of entries, as `rampart deny build` reads (- for stdin)")
		ttl = c.fs.Duration("ttl", time.Hour, "how long the entry stays")
		reason = c.fs.String("reason", "", "why (kept with the entry)")
	}
	if err := c.parse(rest); err != nil {
		return err
	}
	var raw []byte
	switch verb {
	case "list":
		if err = c.want(0, 0, ""); err == nil {
			_, err = c.client.Deny(ctx, &raw)
		}
	case "remove":
		if err = c.want(2, 2, "KIND VALUE"); err == nil {
			_, err = c.client.DenyRemove(ctx, c.args[0], c.args[1], &raw)
		}
	case "add":
		var list []byte
		if list, err = denyList(c, *file, *ttl, *reason); err == nil {
			_, err = c.client.DenyAdd(ctx, list, &raw)
		}
	}
	if err != nil {
		return err
	}
	if c.json() {
		return printRaw(env.Stdout, raw)
	}
	return renderDeny(env.Stdout, raw)
}

// denyList is the body of deny add: the file, or one entry from the
// arguments.
func denyList(c *cmd, file string, ttl time.Duration, reason string) ([]byte, error) {
	if file != "" {
		if len(c.args) > 0 {
			return nil, fmt.Errorf("deny add: give -f FILE or KIND VALUE, not both")
		}
		if file == "-" {
			return io.ReadAll(c.env.Stdin)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("deny add: %w", err)
		}
		return data, nil
	}
	if err := c.want(2, 2, "KIND VALUE [-ttl D] [-reason R] | -f FILE"); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("deny add: -ttl %s must be positive", ttl)
	}
	return json.Marshal([]map[string]string{{"kind": c.args[0], "value": c.args[1], "ttl": ttl.String(), "reason": reason}})
}

func nodes(ctx context.Context, env Env, args []string) error {
	verb, rest, err := sub("nodes", args, "list", "enroll", "revoke")
	if err != nil {
		return err
	}
	c := newCmd("nodes "+verb, env)
	if err := c.parse(rest); err != nil {
		return err
	}
	var raw []byte
	switch verb {
	case "list":
		if err := c.want(0, 0, ""); err != nil {
			return err
		}
		ns, err := c.client.Nodes(ctx, &raw)
		if err != nil {
			return err
		}
		if c.json() {
			return printRaw(env.Stdout, raw)
		}
		renderNodes(env.Stdout, ns)
	case "enroll":
		if err := c.want(1, 1, "ID"); err != nil {
			return err
		}
		n, err := c.client.Enroll(ctx, c.args[0], &raw)
		if err != nil {
			return err
		}
		if c.json() {
			return printRaw(env.Stdout, raw)
		}
		fmt.Fprintf(env.Stdout, "node %s enrolled at %s\ntoken: %s\n(shown once: put it in the node's -control-token-file)\n",
			n.ID, n.EnrolledAt.Format(time.RFC3339), n.Token)
	case "revoke":
		if err := c.want(1, 1, "ID"); err != nil {
			return err
		}
		if err := c.client.Revoke(ctx, c.args[0]); err != nil {
			return err
		}
		if c.json() {
			return printRaw(env.Stdout, []byte(`{"id":`+quote(c.args[0])+`,"revoked":true}`))
		}
		fmt.Fprintf(env.Stdout, "node %s revoked\n", c.args[0])
	}
	return nil
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// printRaw prints the API's JSON answer, indented.
// show prints the API's JSON with -o json, else what render writes.
func (c *cmd) show(raw []byte, render func(io.Writer)) error {
	if c.json() {
		return printRaw(c.env.Stdout, raw)
	}
	render(c.env.Stdout)
	return nil
}

func printRaw(w io.Writer, raw []byte) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		_, err = w.Write(raw)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
