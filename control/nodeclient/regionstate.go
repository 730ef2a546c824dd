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

// AgentReport is what a node reports of its anycast agent: the prefixes
// it announces (announced or held, masked, sorted, unique), every VIP's
// state with its reason and the guard's view (sorted by prefix), and the
// min-sites guard. An agent without anycast reports an empty Announcing
// and no VIPs or guard.
type AgentReport struct {
	Announcing []string
	VIPs       []model.VIPReport
	Guard      *model.AnycastGuard
}

// Bounds of what AgentStatus keeps of an agent's document.
const (
	MaxAgentVIPs    = 4096 // VIPs past this are left out (the control plane refuses more)
	MaxAgentTextLen = 512  // reasons, verdicts and drain notes are clipped to this many bytes
)

// AgentAnnouncing asks an anycast agent which VIP prefixes it announces;
// see AgentStatus.
func AgentAnnouncing(ctx context.Context, hc *http.Client, base string) ([]string, error) {
	r, err := AgentStatus(ctx, hc, base)
	return r.Announcing, err
}

// AgentStatus asks an anycast agent's admin listener (base, e.g.
// http://127.0.0.1:9902) for its /anycast/status: the VIPs in state
// announced or held count as announcing (a draining VIP is on its way out
// and does not count). An agent without anycast (404) announces nothing.
func AgentStatus(ctx context.Context, hc *http.Client, base string) (AgentReport, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/anycast/status", nil)
	if err != nil {
		return AgentReport{}, fmt.Errorf("agent status %s: %w", base, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return AgentReport{}, fmt.Errorf("agent status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return AgentReport{Announcing: []string{}}, nil
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return AgentReport{}, fmt.Errorf("agent status: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return parseAgentStatus(io.LimitReader(resp.Body, 8<<20))
}

// parseAnnouncing reads the announced VIPs of an anycast status document.
func parseAnnouncing(r io.Reader) ([]string, error) {
	rep, err := parseAgentStatus(r)
	return rep.Announcing, err
}

// parseAgentStatus reads an anycast status document (anycast.Status as
// JSON). A VIP whose prefix does not parse fails the document (the
// announced list would be wrong); a state this client does not know is
// kept as model.VIPUnknown with the agent's word in the reason.
func parseAgentStatus(r io.Reader) (AgentReport, error) {
	var st struct {
		MinSites    int    `json:"min_sites"`
		GuardSource string `json:"guard_source"`
		VIPs        []struct {
			Prefix  string    `json:"prefix"`
			State   string    `json:"state"`
			Since   time.Time `json:"since"`
			Reason  string    `json:"reason"`
			Drained string    `json:"drained"`
			Guard   struct {
				Active bool              `json:"active"`
				Last   string            `json:"last"`
				Others []json.RawMessage `json:"other_sites"`
			} `json:"guard"`
		} `json:"vips"`
	}
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return AgentReport{}, fmt.Errorf("agent status: %w", err)
	}
	rep := AgentReport{Announcing: []string{}, Guard: &model.AnycastGuard{MinSites: max(st.MinSites, 0), Source: oneLine(st.GuardSource, MaxAgentTextLen)}}
	for i, v := range st.VIPs {
		p, err := netip.ParsePrefix(v.Prefix)
		if err != nil {
			return AgentReport{}, fmt.Errorf("agent status: vips[%d]: %w", i, err)
		}
		pfx := p.Masked().String()
		if v.State == model.VIPAnnounced || v.State == model.VIPHeld {
			rep.Announcing = append(rep.Announcing, pfx)
		}
		if v.Guard.Active {
			rep.Guard.Holding++
		}
		if len(rep.VIPs) >= MaxAgentVIPs {
			continue
		}
		vr := model.VIPReport{Prefix: pfx, State: v.State, Reason: oneLine(v.Reason, MaxAgentTextLen), Since: v.Since.UTC(),
			Drained: oneLine(v.Drained, MaxAgentTextLen), GuardHolding: v.Guard.Active,
			GuardVerdict: oneLine(v.Guard.Last, MaxAgentTextLen), OtherSites: len(v.Guard.Others)}
		if !model.KnownVIPState(v.State) {
			vr.State, vr.Reason = model.VIPUnknown, oneLine(fmt.Sprintf("agent state %q: %s", v.State, v.Reason), MaxAgentTextLen)
		}
		rep.VIPs = append(rep.VIPs, vr)
	}
	slices.Sort(rep.Announcing)
	rep.Announcing = slices.Compact(rep.Announcing)
	slices.SortStableFunc(rep.VIPs, func(a, b model.VIPReport) int { return strings.Compare(a.Prefix, b.Prefix) })
	return rep, nil
}

// oneLine makes agent text fit a report: control characters become
// spaces, invalid UTF-8 is dropped and the text is clipped to max bytes.
func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max-3], "") + "..."
	}
	return s
}
