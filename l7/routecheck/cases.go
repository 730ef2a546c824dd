package routecheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/rampart-edge/rampart/l7/region"
)

// MaxCasesBytes bounds a cases file.
const MaxCasesBytes = 16 << 20

// Case is one request and what it should come to.
type Case struct {
	Name    string            `yaml:"name"`
	Host    string            `yaml:"host"`
	Method  string            `yaml:"method"`  // default GET
	Path    string            `yaml:"path"`    // may end in ?query
	Query   string            `yaml:"query"`   // raw query, without "?" (or put it in path)
	Headers map[string]string `yaml:"headers"` // route matchers and the region hint see them
	// Tenant is the verified identity's tenant (auth is not run here).
	Tenant string `yaml:"tenant"`
	// Region is the proxy's own region.
	Region string `yaml:"region"`
	// Roll is the random number the decision spreads weighted and ramping
	// traffic with (default 0).
	Roll   uint32 `yaml:"roll"`
	Expect Expect `yaml:"expect"`
}

// Expect is a case's expected outcome. Route is the matched route id, or
// "404"/"405". Target is a region, "503" when the decision fails, or "-"
// for a route without a platform; empty Target or Reason are not checked.
type Expect struct {
	Route      string `yaml:"route"`
	Target     string `yaml:"target"`
	Reason     string `yaml:"reason"`
	Candidates string `yaml:"candidates"` // "|"-joined in region order; empty: not checked
}

type casesFile struct {
	Cases []Case `yaml:"cases"`
}

// ParseCases reads a cases file strictly: unknown keys, a second document,
// a case without a name or an expected route, duplicate names and unknown
// reason codes are errors naming the case.
func ParseCases(data []byte) ([]Case, error) {
	if len(data) > MaxCasesBytes {
		return nil, fmt.Errorf("cases file is %d bytes, more than the %d allowed", len(data), MaxCasesBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f casesFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("cases file is empty")
		}
		return nil, fmt.Errorf("parse cases: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("parse cases: more than one YAML document")
	}
	if len(f.Cases) == 0 {
		return nil, errors.New("cases file lists no cases")
	}
	seen := map[string]bool{}
	for i := range f.Cases {
		c := &f.Cases[i]
		if c.Name == "" {
			return nil, fmt.Errorf("case #%d: name is missing", i+1)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("case %q: duplicate name", c.Name)
		}
		seen[c.Name] = true
		if c.Method == "" {
			c.Method = "GET"
		}
		switch {
		case c.Host == "":
			return nil, fmt.Errorf("case %q: host is missing", c.Name)
		case !strings.HasPrefix(c.Path, "/"):
			return nil, fmt.Errorf("case %q: path %q must start with /", c.Name, c.Path)
		case c.Expect.Route == "":
			return nil, fmt.Errorf("case %q: expect.route is missing (a route id, 404 or 405)", c.Name)
		}
		if r := c.Expect.Reason; r != "" && r != "-" {
			if _, ok := region.ParseReason(r); !ok {
				return nil, fmt.Errorf("case %q: expect.reason %q is not a reason code", c.Name, r)
			}
		}
	}
	return f.Cases, nil
}
