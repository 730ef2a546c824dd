package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxConfigBytes bounds a YAML config file. Larger input is refused unread.
const MaxConfigBytes = 256 << 20

// ParseYAML decodes a declarative config strictly: unknown keys, duplicate
// keys, a second document and trailing garbage are errors.
func ParseYAML(data []byte) (*Config, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("config is %d bytes, more than the %d allowed", len(data), MaxConfigBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("config is empty")
		}
		return nil, fmt.Errorf("parse config: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse config: more than one YAML document")
	}
	return &cfg, nil
}

// Normalize fills defaults and brings names to canonical form in place:
// hosts lower-cased, request classes derived from methods when absent, and
// listeners, clusters and routes sorted by name or id so the canonical bytes
// do not depend on the order of the source file. It never hides a problem
// that Validate reports (a missing timeout stays missing).
func Normalize(c *Config) {
	if c.Routing.EncodedSlashes == "" {
		c.Routing.EncodedSlashes = "reject"
	}
	if c.Routing.MaxRouteTimeoutMs == 0 {
		c.Routing.MaxRouteTimeoutMs = DefaultMaxRouteTimeoutMs
	}
	for i := range c.Listeners {
		normalizeListener(&c.Listeners[i])
	}
	normalizeResilience(c)
	normalizePolicies(c)
	normalizeL4(&c.L4)
	normalizeRegional(c)
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		setDefault(&cl.ConnectTimeoutMs, DefaultConnectTimeoutMs)
		setDefault(&cl.MaxIdlePerEndpoint, DefaultMaxIdlePerEndpoint)
		for j := range cl.Endpoints {
			setDefault(&cl.Endpoints[j].Weight, 1)
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		r.Host = strings.ToLower(strings.TrimSpace(r.Host))
		if r.Host == "" {
			r.Host = "*"
		}
		if r.RequestClass == "" {
			r.RequestClass = "read"
			for _, m := range r.Methods {
				if !safeMethod(m) {
					r.RequestClass = "write"
				}
			}
			if len(r.Methods) == 0 {
				r.RequestClass = "write"
			}
		}
		if r.Idempotency == "" && r.RequestClass == "read" {
			r.Idempotency = "safe"
		}
		if len(r.TrafficSplit) == 0 && r.UpstreamCluster != "" {
			r.TrafficSplit = []Split{{Revision: r.UpstreamCluster, Weight: 100}}
		}
	}
	sort.SliceStable(c.Listeners, func(i, j int) bool { return c.Listeners[i].Name < c.Listeners[j].Name })
	sort.SliceStable(c.Clusters, func(i, j int) bool { return c.Clusters[i].Name < c.Clusters[j].Name })
	sort.SliceStable(c.Routes, func(i, j int) bool { return c.Routes[i].ID < c.Routes[j].ID })
}

func normalizeListener(l *Listener) {
	if len(l.Protocols) == 0 {
		if l.TLS != nil {
			l.Protocols = []string{"h2", "http1"}
		} else {
			l.Protocols = []string{"http1"}
		}
	}
	if l.TLS != nil && l.TLS.MinVersion == "" {
		l.TLS.MinVersion = "1.2"
	}
	setDefault(&l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	setDefault(&l.ReadHeaderTimeoutMs, DefaultReadHeaderTimeoutMs)
	setDefault(&l.IdleTimeoutMs, DefaultIdleTimeoutMs)
	setDefault(&l.MaxConnections, DefaultMaxConnections)
	setDefault(&l.H2MaxConcurrentStreams, DefaultH2MaxStreams)
	setDefault(&l.H2MaxResetsPerSecond, DefaultH2MaxResetsPerSec)
	setDefault(&l.RequestBodyTimeoutMs, DefaultRequestBodyTimeoutMs)
	setDefault(&l.TunnelIdleTimeoutMs, DefaultTunnelIdleTimeoutMs)
}

func setDefault(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

func safeMethod(m string) bool { return m == "GET" || m == "HEAD" || m == "OPTIONS" }
