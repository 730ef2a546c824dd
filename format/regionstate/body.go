package regionstate

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
)

// The body is one line of canonical JSON, every field present, in this
// order, with no whitespace:
//
//	{"regions":[{"name":N,"healthy":B,"config_version":{"epoch":E,"sequence":S},"draining":B},...],
//	 "platforms":[{"name":N,"writer":W,"writer_epoch":E,"replicas":[{"region":R,"lag_ms":L,"observed_at_unix_nano":T},...]},...],
//	 "sites":[{"name":N,"region":R,"announcing":[P,...],"reported_at_unix_nano":T},...],
//	 "quota_leases":[{"policy":P,"region":R,"per_second":N,"burst":B,"nodes":C,"expires_unix_nano":T},...]}
//
// except that "sites" and "quota_leases" are left out when they are empty
// (and only then), so a document without them keeps the bytes it had
// before they existed.
// The wire types below mirror it for strict decoding; encodeBody writes it
// by hand so field order and spacing never depend on a library.

type wireBody struct {
	Regions     []wireRegion     `json:"regions"`
	Platforms   []wirePlatform   `json:"platforms"`
	Sites       []wireSite       `json:"sites"`
	QuotaLeases []wireQuotaLease `json:"quota_leases"`
}

type wireSite struct {
	Name       string   `json:"name"`
	Region     string   `json:"region"`
	Announcing []string `json:"announcing"`
	ReportedAt int64    `json:"reported_at_unix_nano"`
}

type wireQuotaLease struct {
	Policy    string `json:"policy"`
	Region    string `json:"region"`
	PerSecond uint64 `json:"per_second"`
	Burst     uint64 `json:"burst"`
	Nodes     uint64 `json:"nodes"`
	Expires   int64  `json:"expires_unix_nano"`
}

type wireRegion struct {
	Name          string           `json:"name"`
	Healthy       bool             `json:"healthy"`
	ConfigVersion envelope.Version `json:"config_version"`
	Draining      bool             `json:"draining"`
}

type wirePlatform struct {
	Name        string        `json:"name"`
	Writer      string        `json:"writer"`
	WriterEpoch uint64        `json:"writer_epoch"`
	Replicas    []wireReplica `json:"replicas"`
}

type wireReplica struct {
	Region     string `json:"region"`
	LagMs      uint64 `json:"lag_ms"`
	ObservedAt int64  `json:"observed_at_unix_nano"`
}

// encodeBody appends the canonical body of s to b. Names are validated
// ([A-Za-z0-9._-]) before this, so they need no escaping.
func encodeBody(b []byte, s *State) []byte {
	b = append(b, `{"regions":[`...)
	for i, r := range s.Regions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = strconv.AppendQuote(b, r.Name)
		b = append(b, `,"healthy":`...)
		b = strconv.AppendBool(b, r.Healthy)
		b = append(b, `,"config_version":{"epoch":`...)
		b = strconv.AppendUint(b, r.ConfigVersion.Epoch, 10)
		b = append(b, `,"sequence":`...)
		b = strconv.AppendUint(b, r.ConfigVersion.Sequence, 10)
		b = append(b, `},"draining":`...)
		b = strconv.AppendBool(b, r.Draining)
		b = append(b, '}')
	}
	b = append(b, `],"platforms":[`...)
	for i, p := range s.Platforms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = strconv.AppendQuote(b, p.Name)
		b = append(b, `,"writer":`...)
		b = strconv.AppendQuote(b, p.Writer)
		b = append(b, `,"writer_epoch":`...)
		b = strconv.AppendUint(b, p.WriterEpoch, 10)
		b = append(b, `,"replicas":[`...)
		for j, r := range p.Replicas {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"region":`...)
			b = strconv.AppendQuote(b, r.Region)
			b = append(b, `,"lag_ms":`...)
			b = strconv.AppendUint(b, r.LagMs, 10)
			b = append(b, `,"observed_at_unix_nano":`...)
			b = strconv.AppendInt(b, r.ObservedAt.UnixNano(), 10)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	b = append(b, ']')
	if len(s.Sites) > 0 {
		b = append(b, `,"sites":[`...)
		for i, st := range s.Sites {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = strconv.AppendQuote(b, st.Name)
			b = append(b, `,"region":`...)
			b = strconv.AppendQuote(b, st.Region)
			b = append(b, `,"announcing":[`...)
			for j, a := range st.Announcing {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendQuote(b, a)
			}
			b = append(b, `],"reported_at_unix_nano":`...)
			b = strconv.AppendInt(b, st.ReportedAt.UnixNano(), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(s.QuotaLeases) > 0 {
		b = append(b, `,"quota_leases":[`...)
		for i, l := range s.QuotaLeases {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"policy":`...)
			b = strconv.AppendQuote(b, l.Policy)
			b = append(b, `,"region":`...)
			b = strconv.AppendQuote(b, l.Region)
			b = append(b, `,"per_second":`...)
			b = strconv.AppendUint(b, l.PerSecond, 10)
			b = append(b, `,"burst":`...)
			b = strconv.AppendUint(b, l.Burst, 10)
			b = append(b, `,"nodes":`...)
			b = strconv.AppendUint(b, l.Nodes, 10)
			b = append(b, `,"expires_unix_nano":`...)
			b = strconv.AppendInt(b, l.Expires.UnixNano(), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// decodeBody reads a canonical body into a State with the given version
// and creation time (from the envelope) and validates it. It refuses, in
// this order: invalid JSON or duplicate keys, unknown fields, wrong types
// and trailing bytes (ErrMalformed); a state that does not validate
// (ErrInvalid); any other encoding than the canonical one (ErrMalformed).
func decodeBody(body []byte, v envelope.Version, created time.Time) (*State, error) {
	if err := checkDuplicates(body); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var w wireBody
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing bytes after the body at byte %d", ErrMalformed, dec.InputOffset())
	}
	s := &State{Version: v, Created: created.UTC(), Regions: make([]Region, len(w.Regions)), Platforms: make([]Platform, len(w.Platforms))}
	for i, r := range w.Regions {
		s.Regions[i] = Region(r)
	}
	for i, p := range w.Platforms {
		out := Platform{Name: p.Name, Writer: p.Writer, WriterEpoch: p.WriterEpoch, Replicas: make([]Replica, len(p.Replicas))}
		for j, r := range p.Replicas {
			out.Replicas[j] = Replica{Region: r.Region, LagMs: r.LagMs, ObservedAt: time.Unix(0, r.ObservedAt).UTC()}
		}
		s.Platforms[i] = out
	}
	for _, st := range w.Sites {
		s.Sites = append(s.Sites, Site{Name: st.Name, Region: st.Region, Announcing: st.Announcing, ReportedAt: time.Unix(0, st.ReportedAt).UTC()})
	}
	for _, l := range w.QuotaLeases {
		s.QuotaLeases = append(s.QuotaLeases, QuotaLease{Policy: l.Policy, Region: l.Region, PerSecond: l.PerSecond, Burst: l.Burst, Nodes: l.Nodes, Expires: time.Unix(0, l.Expires).UTC()})
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if canon := encodeBody(make([]byte, 0, len(body)), s); !bytes.Equal(canon, body) {
		at := 0
		for at < len(canon) && at < len(body) && canon[at] == body[at] {
			at++
		}
		return nil, fmt.Errorf("%w: not the canonical encoding from byte %d (fields in order, all present, no whitespace, no escapes)", ErrMalformed, at)
	}
	return s, nil
}

// checkDuplicates walks the JSON tokens and refuses an object that names
// one key twice (encoding/json would keep the last one silently).
func checkDuplicates(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		keys   map[string]struct{}
		key    bool // the next string token in this object is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].key {
			k, ok := tok.(string)
			if !ok {
				// A closing brace ends the object.
				stack = stack[:top]
				continue
			}
			if _, dup := stack[top].keys[k]; dup {
				return fmt.Errorf("%w: duplicate key %q before byte %d", ErrMalformed, k, dec.InputOffset())
			}
			stack[top].keys[k] = struct{}{}
			stack[top].key = false
			continue
		}
		if top >= 0 && stack[top].object {
			stack[top].key = true // a value was read; a key comes next
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, keys: map[string]struct{}{}, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:top]
		}
	}
}

func compareLease(a, b QuotaLease) int {
	if c := cmp.Compare(a.Policy, b.Policy); c != 0 {
		return c
	}
	return cmp.Compare(a.Region, b.Region)
}

// sorted returns a copy of s with regions, platforms and replicas sorted,
// so Build never reorders the caller's slices.
func sorted(s *State) *State {
	out := *s
	out.Regions = slices.Clone(s.Regions)
	slices.SortStableFunc(out.Regions, func(a, b Region) int { return cmp.Compare(a.Name, b.Name) })
	out.Platforms = make([]Platform, len(s.Platforms))
	for i, p := range s.Platforms {
		p.Replicas = slices.Clone(p.Replicas)
		slices.SortStableFunc(p.Replicas, func(a, b Replica) int { return cmp.Compare(a.Region, b.Region) })
		out.Platforms[i] = p
	}
	slices.SortStableFunc(out.Platforms, func(a, b Platform) int { return cmp.Compare(a.Name, b.Name) })
	if len(s.Sites) > 0 {
		out.Sites = make([]Site, len(s.Sites))
		for i, st := range s.Sites {
			st.Announcing = slices.Clone(st.Announcing)
			slices.Sort(st.Announcing)
			out.Sites[i] = st
		}
		slices.SortStableFunc(out.Sites, func(a, b Site) int { return cmp.Compare(a.Name, b.Name) })
	} else {
		out.Sites = nil
	}
	if len(s.QuotaLeases) > 0 {
		out.QuotaLeases = slices.Clone(s.QuotaLeases)
		slices.SortStableFunc(out.QuotaLeases, compareLease)
	} else {
		out.QuotaLeases = nil
	}
	return &out
}
