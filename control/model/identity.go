package model

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Identity names a node and places it: rollout stages select nodes by it.
type Identity struct {
	NodeID string `json:"node_id"`
	Region string `json:"region,omitempty"`
	Zone   string `json:"zone,omitempty"`
	Cohort string `json:"cohort,omitempty"`
}

// Bounds of identity fields.
const (
	MaxNodeIDBytes = 128
	MaxLabelBytes  = 64
)

// Validate checks that the node id is present and every field is a short
// token of [A-Za-z0-9._-].
func (id Identity) Validate() error {
	if id.NodeID == "" {
		return fmt.Errorf("node id is missing")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"node", id.NodeID, MaxNodeIDBytes}, {"region", id.Region, MaxLabelBytes}, {"zone", id.Zone, MaxLabelBytes}, {"cohort", id.Cohort, MaxLabelBytes}} {
		if len(f.v) > f.max {
			return fmt.Errorf("%s is %d bytes, over the %d limit", f.name, len(f.v), f.max)
		}
		for i := 0; i < len(f.v); i++ {
			if c := f.v[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
				return fmt.Errorf("%s %.64q: byte %q is not allowed (want [A-Za-z0-9._-])", f.name, f.v, c)
			}
		}
	}
	return nil
}

// WatchQuery is what a node sends when it long-polls: who it is, what it
// has, and how long it will wait.
type WatchQuery struct {
	Identity
	Version  snapshot.Version // snapshot watch: the newest version the node has
	Sequence uint64           // deny watch: the deny list sequence the node has
	Timeout  time.Duration    // 0: the server's default
}

// MaxWatchTimeout bounds how long one long-poll may wait.
const MaxWatchTimeout = 5 * time.Minute

// Values encodes the query for a URL.
func (q WatchQuery) Values() url.Values {
	v := url.Values{}
	v.Set("node", q.NodeID)
	for k, s := range map[string]string{"region": q.Region, "zone": q.Zone, "cohort": q.Cohort} {
		if s != "" {
			v.Set(k, s)
		}
	}
	v.Set("version", q.Version.String())
	v.Set("sequence", strconv.FormatUint(q.Sequence, 10))
	if q.Timeout > 0 {
		v.Set("timeout", q.Timeout.String())
	}
	return v
}

// ParseWatchQuery reads and checks a watch query. Every parameter may
// appear at most once; unknown parameters are refused.
func ParseWatchQuery(v url.Values) (WatchQuery, error) {
	var q WatchQuery
	for k, vs := range v {
		switch k {
		case "node", "region", "zone", "cohort", "version", "sequence", "timeout":
		default:
			return q, fmt.Errorf("unknown query parameter %.32q", k)
		}
		if len(vs) != 1 {
			return q, fmt.Errorf("query parameter %s given %d times", k, len(vs))
		}
	}
	q.Identity = Identity{NodeID: v.Get("node"), Region: v.Get("region"), Zone: v.Get("zone"), Cohort: v.Get("cohort")}
	if err := q.Identity.Validate(); err != nil {
		return q, err
	}
	if s := v.Get("version"); s != "" {
		ver, err := ParseVersion(s)
		if err != nil {
			return q, err
		}
		q.Version = ver
	}
	if s := v.Get("sequence"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("sequence %.32q is not a number", s)
		}
		q.Sequence = n
	}
	if s := v.Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > MaxWatchTimeout {
			return q, fmt.Errorf("timeout %.32q must be a duration between 0 and %s", s, MaxWatchTimeout)
		}
		q.Timeout = d
	}
	return q, nil
}
