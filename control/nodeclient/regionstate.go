package nodeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// watchRegionState follows GET /v1/node/regionstate like the deny
// channel: each document newer than the one handed over is verified and
// written atomically to RegionStateFile. When the control plane is
// unreachable the file stays as it is (the proxy and the agent judge its
// age themselves).
func (cl *Client) watchRegionState(ctx context.Context) {
	b := backoff{min: cl.c.MinBackoff, max: cl.c.MaxBackoff}
	for ctx.Err() == nil {
		cl.mu.Lock()
		q := model.WatchQuery{Identity: cl.c.Identity, Version: snapshot.Version(cl.regionVersion), Timeout: cl.c.WatchTimeout}
		cl.mu.Unlock()
		_, body, err := cl.poll(ctx, "/v1/node/regionstate", q, regionstate.MaxFileBytes)
		if err != nil {
			if ctx.Err() == nil {
				cl.log.Debug("region state watch failed; retrying", "err", err)
				b.wait(ctx)
			}
			continue
		}
		if body == nil {
			b.reset()
			continue
		}
		if err := cl.takeRegionState(body); err != nil {
			b.wait(ctx)
			continue
		}
		b.reset()
	}
}

func (cl *Client) takeRegionState(body []byte) error {
	s, err := regionstate.Parse(body, cl.c.PublicKey)
	if err != nil {
		cl.refuse("region state", snapshot.Version{}, err)
		return err
	}
	cl.mu.Lock()
	have := cl.regionVersion
	cl.mu.Unlock()
	if !have.Less(s.Version) {
		err := fmt.Errorf("version %s is not newer than %s", s.Version, have)
		cl.refuse("region state", snapshot.Version{}, err)
		return err
	}
	if err := envelope.WriteFileAtomic(cl.c.RegionStateFile, body, 0o600); err != nil {
		cl.log.Error("cannot hand the region state over", "err", err)
		return err
	}
	cl.mu.Lock()
	cl.regionVersion = s.Version
	cl.st.RegionState = s.Version.String()
	cl.mu.Unlock()
	cl.log.Debug("region state handed over", "version", s.Version.String(), "regions", len(s.Regions))
	return nil
}

// RegionStateVersion is the region-state document handed over last.
func (cl *Client) RegionStateVersion() envelope.Version {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.regionVersion
}

// AgentAnnouncing asks an anycast agent's admin listener (base, e.g.
// http://127.0.0.1:9902) which VIP prefixes it announces: the VIPs of its
// /anycast/status in state announced or held (a draining VIP is on its
// way out and does not count). An agent without anycast (404) announces
// nothing. The prefixes come back masked, sorted and unique.
func AgentAnnouncing(ctx context.Context, hc *http.Client, base string) ([]string, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/anycast/status", nil)
	if err != nil {
		return nil, fmt.Errorf("agent status %s: %w", base, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return []string{}, nil
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, fmt.Errorf("agent status: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return parseAnnouncing(io.LimitReader(resp.Body, 8<<20))
}

// parseAnnouncing reads the VIPs of an anycast status document.
func parseAnnouncing(r io.Reader) ([]string, error) {
	var st struct {
		VIPs []struct {
			Prefix string `json:"prefix"`
			State  string `json:"state"`
		} `json:"vips"`
	}
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return nil, fmt.Errorf("agent status: %w", err)
	}
	out := []string{}
	for i, v := range st.VIPs {
		if v.State != "announced" && v.State != "held" {
			continue
		}
		p, err := netip.ParsePrefix(v.Prefix)
		if err != nil {
			return nil, fmt.Errorf("agent status: vips[%d]: %w", i, err)
		}
		out = append(out, p.Masked().String())
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
