package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/rampart-edge/rampart/control/model"
)

// PurgeResult is the answer of POST /v1/purge.
type PurgeResult struct {
	Sequence uint64          `json:"sequence"`
	Rule     model.PurgeRule `json:"rule"`
	Rules    int             `json:"rules"`
}

// Purge publishes a cache purge rule: the objects stored before now
// matching every selector set go from every node's cache.
func (c *Client) Purge(ctx context.Context, route, prefix, surrogateKey string, raw *[]byte) (*PurgeResult, error) {
	in := map[string]string{}
	for k, v := range map[string]string{"route": route, "prefix": prefix, "surrogate_key": surrogateKey} {
		if v != "" {
			in[k] = v
		}
	}
	var out PurgeResult
	return &out, c.post(ctx, "/v1/purge", in, &out, raw)
}

// PurgeRules returns the purge document's rules (GET /v1/purge).
func (c *Client) PurgeRules(ctx context.Context, raw *[]byte) (*model.PurgeState, error) {
	var out model.PurgeState
	return &out, c.get(ctx, "/v1/purge", &out, raw)
}

// purgeCmd is `rampart control purge -route R -prefix P -surrogate-key K`
// (at least one) and `rampart control purge list`.
func purgeCmd(ctx context.Context, env Env, args []string) error {
	if len(args) > 0 && args[0] == "list" {
		c := newCmd("purge list", env)
		if err := c.parse(args[1:]); err != nil {
			return err
		}
		if err := c.want(0, 0, ""); err != nil {
			return err
		}
		var raw []byte
		s, err := c.client.PurgeRules(ctx, &raw)
		if err != nil {
			return err
		}
		return c.show(raw, func(w io.Writer) { renderPurge(w, s) })
	}
	c := newCmd("purge", env)
	route := c.fs.String("route", "", "purge the objects of this route id")
	prefix := c.fs.String("prefix", "", "purge the objects whose key (host+path?query as routed) starts with this")
	sk := c.fs.String("surrogate-key", "", "purge the objects whose Surrogate-Key response header names this key")
	if err := c.parse(args); err != nil {
		return err
	}
	const usage = "-route R | -prefix HOST/PATH | -surrogate-key K (several: an object must match all) | list"
	if err := c.want(0, 0, usage); err != nil {
		return err
	}
	if *route == "" && *prefix == "" && *sk == "" {
		return fmt.Errorf("usage: %s %s", c.fs.Name(), usage)
	}
	var raw []byte
	res, err := c.client.Purge(ctx, *route, *prefix, *sk, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) {
		fmt.Fprintf(w, "purge rule %d published in purge document 1.%d (%d rules listed): route %q, prefix %q, surrogate key %q; nodes apply it within a second\n",
			res.Rule.ID, res.Sequence, res.Rules, res.Rule.Route, res.Rule.Prefix, res.Rule.SurrogateKey)
	})
}

func renderPurge(w io.Writer, s *model.PurgeState) {
	fmt.Fprintf(w, "purge document 1.%d, %d rules\n", s.Sequence, len(s.Rules))
	if len(s.Rules) == 0 {
		return
	}
	tw := table(w)
	row(tw, "ID", "AT", "ROUTE", "PREFIX", "SURROGATE-KEY", "BY")
	for _, r := range s.Rules {
		row(tw, r.ID, when(r.At), r.Route, r.Prefix, r.SurrogateKey, r.By)
	}
	_ = tw.Flush()
}
