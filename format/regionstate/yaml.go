package regionstate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/format/envelope"
)

// MaxYAMLBytes bounds a source file for ParseYAML.
const MaxYAMLBytes = 4 << 20

type yamlState struct {
	Regions []struct {
		Name          string `yaml:"name"`
		Healthy       bool   `yaml:"healthy"`
		ConfigVersion string `yaml:"config_version"`
		Draining      bool   `yaml:"draining"`
	} `yaml:"regions"`
	Platforms []struct {
		Name        string `yaml:"name"`
		Writer      string `yaml:"writer"`
		WriterEpoch uint64 `yaml:"writer_epoch"`
		Replicas    []struct {
			Region      string `yaml:"region"`
			LagMs       uint64 `yaml:"lag_ms"`
			ObservedAt  string `yaml:"observed_at"`
			ObservedAgo string `yaml:"observed_ago"`
		} `yaml:"replicas"`
	} `yaml:"platforms"`
	Sites []struct {
		Name        string   `yaml:"name"`
		Region      string   `yaml:"region"`
		Announcing  []string `yaml:"announcing"`
		ReportedAgo string   `yaml:"reported_ago"`
	} `yaml:"sites"`
	QuotaLeases []struct {
		Policy    string `yaml:"policy"`
		Region    string `yaml:"region"`
		PerSecond uint64 `yaml:"per_second"`
		Burst     uint64 `yaml:"burst"`
		Nodes     uint64 `yaml:"nodes"`
		ExpiresIn string `yaml:"expires_in"`
	} `yaml:"quota_leases"`
}

// ParseYAML reads the source of a region-state document (the input of
// `rampart regionstate build`) as the state of version v created at now:
//
//	regions:
//	  - {name: eu-west, healthy: true, config_version: "1.40", draining: false}
//	platforms:
//	  - name: billing
//	    writer: eu-west          # "" or left out: none known
//	    writer_epoch: 7
//	    replicas:
//	      - {region: eu-west, lag_ms: 0, observed_at: "2026-12-02T04:00:00Z"}
//	      - {region: us-east, lag_ms: 250, observed_ago: 2s}
//	sites:
//	  - {name: fra-1, region: eu-west, announcing: [192.0.2.0/24], reported_ago: 1s}
//	quota_leases:
//	  - {policy: api-global, region: eu-west, per_second: 200000, burst: 20000, nodes: 4, expires_in: 10s}
//
// A site's reported_ago and a lease's expires_in are Go durations before and
// after now (left out: now). config_version is "epoch.sequence" (left out: 0.0, unknown); a replica's
// observation time is observed_at (RFC 3339) or observed_ago (a Go duration
// before now), else now. Decoding is strict (unknown keys, a second
// document are errors); the result is sorted and validated.
func ParseYAML(data []byte, v envelope.Version, now time.Time) (*State, error) {
	if len(data) > MaxYAMLBytes {
		return nil, fmt.Errorf("region-state source is %d bytes, more than the %d allowed", len(data), MaxYAMLBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var src yamlState
	if err := dec.Decode(&src); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("region-state source is empty (write {} for no regions)")
		}
		return nil, fmt.Errorf("parse region-state source: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse region-state source: more than one YAML document")
	}
	now = now.UTC().Round(0)
	s := &State{Version: v, Created: now}
	var p problems
	for i, r := range src.Regions {
		out := Region{Name: r.Name, Healthy: r.Healthy, Draining: r.Draining}
		if r.ConfigVersion != "" {
			cv, err := envelope.ParseVersion(r.ConfigVersion)
			if err != nil {
				p.add("regions[%d] (%q): config_version: %v", i, r.Name, err)
			}
			out.ConfigVersion = cv
		}
		s.Regions = append(s.Regions, out)
	}
	for i, pl := range src.Platforms {
		out := Platform{Name: pl.Name, Writer: pl.Writer, WriterEpoch: pl.WriterEpoch}
		for j, r := range pl.Replicas {
			rep := Replica{Region: r.Region, LagMs: r.LagMs, ObservedAt: now}
			switch {
			case r.ObservedAt != "" && r.ObservedAgo != "":
				p.add("platforms[%d] (%q): replicas[%d]: both observed_at and observed_ago", i, pl.Name, j)
			case r.ObservedAt != "":
				t, err := time.Parse(time.RFC3339Nano, r.ObservedAt)
				if err != nil {
					p.add("platforms[%d] (%q): replicas[%d]: observed_at: %v", i, pl.Name, j, err)
				}
				rep.ObservedAt = t.UTC()
			case r.ObservedAgo != "":
				d, err := time.ParseDuration(r.ObservedAgo)
				if err != nil || d < 0 {
					p.add("platforms[%d] (%q): replicas[%d]: observed_ago %q is not a duration ≥ 0", i, pl.Name, j, r.ObservedAgo)
				}
				rep.ObservedAt = now.Add(-d)
			}
			out.Replicas = append(out.Replicas, rep)
		}
		s.Platforms = append(s.Platforms, out)
	}
	for i, st := range src.Sites {
		site := Site{Name: st.Name, Region: st.Region, Announcing: st.Announcing, ReportedAt: now}
		if site.Announcing == nil {
			site.Announcing = []string{}
		}
		if st.ReportedAgo != "" {
			d, err := time.ParseDuration(st.ReportedAgo)
			if err != nil || d < 0 {
				p.add("sites[%d] (%q): reported_ago %q is not a duration ≥ 0", i, st.Name, st.ReportedAgo)
			}
			site.ReportedAt = now.Add(-d)
		}
		s.Sites = append(s.Sites, site)
	}
	for i, l := range src.QuotaLeases {
		lease := QuotaLease{Policy: l.Policy, Region: l.Region, PerSecond: l.PerSecond, Burst: l.Burst, Nodes: l.Nodes, Expires: now}
		if l.ExpiresIn != "" {
			d, err := time.ParseDuration(l.ExpiresIn)
			if err != nil {
				p.add("quota_leases[%d] (%q, %q): expires_in %q is not a duration", i, l.Policy, l.Region, l.ExpiresIn)
			}
			lease.Expires = now.Add(d)
		}
		s.QuotaLeases = append(s.QuotaLeases, lease)
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	s = sorted(s)
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}
