// Package headerrule compiles a route's header rules (remove, set, add, for
// the request and for the response) into a form applied without
// allocation beyond the values it adds. Names are canonicalised once, so
// an HTTP/2 request's lower-case names match; invalid names or values and
// hop-by-hop fields are refused when the rules are compiled, never at
// request time.
package headerrule

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"maps"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// Rules is a route's compiled header rules.
type Rules struct {
	req, resp ops
}

type ops struct {
	remove []string
	set    []field
	add    []field
}

type field struct {
	name  string
	value []string // one element, shared, never modified
}

// Compile checks and compiles rules; nil rules compile to nil (no-op).
func Compile(r *snapshot.HeaderRules) (*Rules, error) {
	if r == nil {
		return nil, nil
	}
	req, err := compileOps("request", r.Request)
	if err != nil {
		return nil, err
	}
	resp, err := compileOps("response", r.Response)
	if err != nil {
		return nil, err
	}
	return &Rules{req: req, resp: resp}, nil
}

func compileOps(side string, o snapshot.HeaderOps) (ops, error) {
	var out ops
	for _, name := range o.Remove {
		if err := checkName(name); err != nil {
			return out, fmt.Errorf("headers.%s.remove: %w", side, err)
		}
		out.remove = append(out.remove, http.CanonicalHeaderKey(name))
	}
	var err error
	if out.set, err = compileFields(side, "set", o.Set); err != nil {
		return out, err
	}
	if out.add, err = compileFields(side, "add", o.Add); err != nil {
		return out, err
	}
	return out, nil
}

func compileFields(side, op string, m map[string]string) ([]field, error) {
	var fs []field
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("headers.%s.%s: %w", side, op, err)
		}
		if err := checkValue(v); err != nil {
			return nil, fmt.Errorf("headers.%s.%s: %q: %w", side, op, name, err)
		}
		fs = append(fs, field{name: http.CanonicalHeaderKey(name), value: []string{strings.TrimSpace(v)}})
	}
	return fs, nil
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty header name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return fmt.Errorf("%q is not a header name", name)
		}
	}
	switch strings.ToLower(name) {
	case "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length":
		return fmt.Errorf("%q is hop-by-hop or framing and cannot be changed", name)
	}
	return nil
}

func checkValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("control byte %q in the value", c)
		}
	}
	return nil
}

// ApplyRequest changes a request's header: remove, then set, then add.
func (r *Rules) ApplyRequest(h http.Header) {
	if r != nil {
		r.req.apply(h)
	}
}

// ApplyResponse changes a response's header the same way.
func (r *Rules) ApplyResponse(h http.Header) {
	if r != nil {
		r.resp.apply(h)
	}
}

func (o *ops) apply(h http.Header) {
	for _, k := range o.remove {
		delete(h, k)
	}
	for _, f := range o.set {
		h[f.name] = f.value[:1:1]
	}
	for _, f := range o.add {
		if cur, ok := h[f.name]; ok {
			h[f.name] = append(cur[:len(cur):len(cur)], f.value[0])
		} else {
			h[f.name] = f.value[:1:1]
		}
	}
}
