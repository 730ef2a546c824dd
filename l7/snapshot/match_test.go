package snapshot

import (
	"strings"
	"testing"
)

func strp(s string) *string { return &s }

func TestMatchValidation(t *testing.T) {
	twin := func(c *Config, m *RouteMatch) {
		r := *byID(c, "get-user")
		r.ID, r.Match = "get-user-v2", m
		c.Routes = append(c.Routes, r)
	}
	hdr := func(fm ...FieldMatch) *RouteMatch { return &RouteMatch{Headers: fm} }
	cases := []struct {
		name   string
		mutate func(c *Config)
		want   string // a substring of the error; "" means valid
	}{
		{"twin with a header matcher", func(c *Config) { twin(c, hdr(FieldMatch{Name: "Accept-Version", Exact: strp("2")})) }, ""},
		{"twins with overlapping matchers", func(c *Config) {
			twin(c, hdr(FieldMatch{Name: "Accept-Version", Prefix: "2"}))
			byID(c, "get-user").Match = hdr(FieldMatch{Name: "accept-version", Exact: strp("2.1")})
		}, `routes "get-user" and "get-user-v2" conflict`},
		{"empty match", func(c *Config) { twin(c, &RouteMatch{}) }, `match lists no headers and no query matchers`},
		{"two tests set", func(c *Config) { twin(c, hdr(FieldMatch{Name: "V", Prefix: "a", Present: true})) }, `must set exactly one of`},
		{"no test set", func(c *Config) { twin(c, hdr(FieldMatch{Name: "V"})) }, `must set exactly one of`},
		{"bad header name", func(c *Config) { twin(c, hdr(FieldMatch{Name: "a b", Present: true})) }, `not a header name`},
		{"host header", func(c *Config) { twin(c, hdr(FieldMatch{Name: "host", Present: true})) }, `cannot be matched`},
		{"set-cookie", func(c *Config) { twin(c, hdr(FieldMatch{Name: "Set-Cookie", Present: true})) }, `cannot be matched`},
		{"identity header", func(c *Config) { twin(c, hdr(FieldMatch{Name: "x-rampart-tenant", Present: true})) }, `carries the verified identity`},
		{"name twice", func(c *Config) {
			twin(c, hdr(FieldMatch{Name: "V", Present: true}, FieldMatch{Name: "v", Prefix: "x"}))
		}, `matched twice`},
		{"bad regex", func(c *Config) { twin(c, hdr(FieldMatch{Name: "V", Regex: "(a"})) }, `missing closing )`},
		{"regex too long", func(c *Config) { twin(c, hdr(FieldMatch{Name: "V", Regex: strings.Repeat("a", 257)})) }, `more than 256`},
		{"regex program too big", func(c *Config) { twin(c, hdr(FieldMatch{Name: "V", Regex: "(a{1,100}){1,10}"})) }, `instructions, more than 512`},
		{"value too long", func(c *Config) { twin(c, hdr(FieldMatch{Name: "V", Exact: strp(strings.Repeat("a", 257))})) }, `longer than 256`},
		{"too many matchers", func(c *Config) {
			m := &RouteMatch{}
			for i := range 9 {
				m.Query = append(m.Query, FieldMatch{Name: string(rune('a' + i)), Present: true})
			}
			twin(c, m)
		}, `9 matchers, more than 8`},
		{"query name missing", func(c *Config) { twin(c, &RouteMatch{Query: []FieldMatch{{Present: true}}}) }, `name is missing`},
	}
	for _, tc := range cases {
		c := loadTestConfig(t, "valid.yaml")
		tc.mutate(c)
		Normalize(c)
		err := Validate(c)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}
