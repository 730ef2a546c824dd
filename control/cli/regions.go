package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
)

// Regions is GET /v1/regions.
type Regions struct {
	Regions  []model.RegionHealth `json:"regions"`
	Document *struct {
		Version envelope.Version `json:"version"`
		Created time.Time        `json:"created"`
	} `json:"document,omitempty"`
}

// Regions returns every region's health.
func (c *Client) Regions(ctx context.Context, raw *[]byte) (*Regions, error) {
	var out Regions
	return &out, c.get(ctx, "/v1/regions", &out, raw)
}

// DrainRegion drains a region (POST /v1/regions/{r}/drain).
func (c *Client) DrainRegion(ctx context.Context, region, reason string, raw *[]byte) (*model.RegionDrain, error) {
	var out model.RegionDrain
	return &out, c.post(ctx, "/v1/regions/"+url.PathEscape(region)+"/drain", map[string]string{"reason": reason}, &out, raw)
}

// UndrainRegion ends a region's drain.
func (c *Client) UndrainRegion(ctx context.Context, region string, raw *[]byte) error {
	return c.post(ctx, "/v1/regions/"+url.PathEscape(region)+"/undrain", nil, nil, raw)
}

// Platforms returns every platform with its writer and lags.
func (c *Client) Platforms(ctx context.Context, raw *[]byte) ([]model.PlatformState, error) {
	var out struct {
		Platforms []model.PlatformState `json:"platforms"`
	}
	err := c.get(ctx, "/v1/platforms", &out, raw)
	return out.Platforms, err
}

// SetWriter switches a platform's writer; expected, when set, makes it a
// compare-and-set on the current epoch.
func (c *Client) SetWriter(ctx context.Context, platform, region string, expected *uint64, raw *[]byte) (*model.PlatformWriter, error) {
	in := map[string]any{"region": region}
	if expected != nil {
		in["expected_epoch"] = *expected
	}
	var out model.PlatformWriter
	return &out, c.post(ctx, "/v1/platforms/"+url.PathEscape(platform)+"/writer", in, &out, raw)
}

func regions(ctx context.Context, c *cmd, args []string) error {
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(0, 0, ""); err != nil {
		return err
	}
	var raw []byte
	rs, err := c.client.Regions(ctx, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { renderRegions(w, rs) })
}

func drainRegion(ctx context.Context, c *cmd, args []string) error {
	reason := c.fs.String("reason", "", "why (shown in regions and the agents' status)")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(1, 1, "REGION [-reason R]"); err != nil {
		return err
	}
	var raw []byte
	d, err := c.client.DrainRegion(ctx, c.args[0], *reason, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) {
		fmt.Fprintf(w, "region %s draining since %s (reason: %s); its sites drain, then withdraw\n", d.Region, when(d.Since), dash(d.Reason))
	})
}

func undrainRegion(ctx context.Context, c *cmd, args []string) error {
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(1, 1, "REGION"); err != nil {
		return err
	}
	var raw []byte
	if err := c.client.UndrainRegion(ctx, c.args[0], &raw); err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { fmt.Fprintf(w, "region %s no longer draining\n", c.args[0]) })
}

func writerCmd(ctx context.Context, env Env, args []string) error {
	verb, rest, err := sub("writer", args, "set")
	if err != nil {
		return err
	}
	c := newCmd("writer "+verb, env)
	expected := c.fs.String("expected-epoch", "", "switch only if the platform's writer epoch is this now (0: no writer yet)")
	if err := c.parse(rest); err != nil {
		return err
	}
	if err := c.want(2, 2, "PLATFORM REGION [-expected-epoch N]"); err != nil {
		return err
	}
	var exp *uint64
	if *expected != "" {
		n, err := strconv.ParseUint(*expected, 10, 64)
		if err != nil {
			return fmt.Errorf("writer set: -expected-epoch %q is not a whole number", *expected)
		}
		exp = &n
	}
	var raw []byte
	pw, err := c.client.SetWriter(ctx, c.args[0], c.args[1], exp, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) {
		fmt.Fprintf(w, "platform %s: writer %s, epoch %d (switched %s)\n", pw.Platform, pw.Region, pw.Epoch, when(pw.SwitchedAt))
	})
}

func platforms(ctx context.Context, c *cmd, args []string) error {
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.want(0, 0, ""); err != nil {
		return err
	}
	var raw []byte
	ps, err := c.client.Platforms(ctx, &raw)
	if err != nil {
		return err
	}
	return c.show(raw, func(w io.Writer) { renderPlatforms(w, ps) })
}

func renderRegions(w io.Writer, rs *Regions) {
	if d := rs.Document; d != nil {
		fmt.Fprintf(w, "region-state document %s, created %s\n", d.Version, when(d.Created))
	} else {
		fmt.Fprintln(w, "no region-state document composed here (a follower, or no leader yet)")
	}
	tw := table(w)
	row(tw, "REGION", "HEALTHY", "NODES", "FRESH", "READY", "VERSION", "DRAINING", "WHY")
	for _, r := range rs.Regions {
		drain := yes(r.Draining)
		if r.Draining && r.DrainReason != "" {
			drain += " (" + r.DrainReason + ")"
		}
		row(tw, r.Name, yes(r.Healthy), r.Nodes, r.Fresh, r.Ready, r.ConfigVersion, drain, r.Why)
	}
	_ = tw.Flush()
}

func renderPlatforms(w io.Writer, ps []model.PlatformState) {
	tw := table(w)
	row(tw, "PLATFORM", "WRITER", "EPOCH", "SWITCHED", "REPLICAS", "LAG")
	for _, p := range ps {
		lags := make([]string, 0, len(p.Lags))
		for _, l := range p.Lags {
			lags = append(lags, fmt.Sprintf("%s=%dms@%s", l.Region, l.LagMs, when(l.ObservedAt)))
		}
		sort.Strings(lags)
		row(tw, p.Name, p.Writer, p.WriterEpoch, when(p.SwitchedAt), strings.Join(p.Replicas, ","), strings.Join(lags, " "))
	}
	_ = tw.Flush()
}
