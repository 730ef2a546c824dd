package snapshot

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		name, in, shape string // shape "" means a parse error is expected
		params          []string
	}{
		{"root", "/", "/", nil},
		{"literals", "/v1/orders/search", "/v1/orders/search", nil},
		{"trailing slash", "/a/", "/a/", nil},
		{"params", "/v1/users/{id}/orders/{order}", "/v1/users/{}/orders/{}", []string{"id", "order"}},
		{"rest", "/static/{path...}", "/static/{...}", []string{"path"}},
		{"param then trailing slash", "/u/{id}/", "/u/{}/", []string{"id"}},
		{"kept escape", "/a%20b", "/a%20b", nil},
		{"empty", "", "", nil},
		{"relative", "a/b", "", nil},
		{"empty segment", "/a//b", "", nil},
		{"dot segment", "/a/../b", "", nil},
		{"rest not last", "/{p...}/a", "", nil},
		{"partial param", "/a{id}", "", nil},
		{"unclosed param", "/{id", "", nil},
		{"empty name", "/{}", "", nil},
		{"bad name", "/{1a}", "", nil},
		{"duplicate name", "/{a}/{a}", "", nil},
		{"too many params", "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", "", nil},
		{"lower-case escape", "/a%2a", "", nil},
		{"escaped unreserved", "/%41", "", nil},
		{"escaped slash", "/a%2Fb", "", nil},
		{"bad byte", "/a b", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := ParseTemplate(tt.in)
			if tt.shape == "" {
				if err == nil {
					t.Fatalf("ParseTemplate(%q) = %+v, want an error", tt.in, tpl)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate(%q): %v", tt.in, err)
			}
			if tpl.Shape() != tt.shape || fmt.Sprint(tpl.Params()) != fmt.Sprint(tt.params) {
				t.Fatalf("ParseTemplate(%q): shape %q params %q, want %q %q", tt.in, tpl.Shape(), tpl.Params(), tt.shape, tt.params)
			}
		})
	}
}

// unparse writes a template back from its segments, naming parameters with
// name (nil keeps the parsed names).
func unparse(tpl Template, name func(i int, s Segment) string) string {
	if len(tpl.Segments) == 0 {
		return "/"
	}
	var b strings.Builder
	n := 0
	for _, s := range tpl.Segments {
		b.WriteByte('/')
		text := s.Text
		if s.Kind != Literal && name != nil {
			text = name(n, s)
		}
		switch s.Kind {
		case Literal:
			b.WriteString(text)
		case Param:
			b.WriteString("{" + text + "}")
		case Rest:
			b.WriteString("{" + text + "...}")
		}
		if s.Kind != Literal {
			n++
		}
	}
	return b.String()
}

// FuzzParseTemplate checks that a parsed template writes back to its input,
// and that its shape survives renaming the parameters. (Shape() itself is
// not a template: "{}" has no name, so it is re-parsed with names filled in.)
func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"/", "/a/", "/v1/users/{id}", "/static/{path...}", "/a%20b/{x}/", "/{a}/{a}", "/{p...}/a",
		"/a//b", "/./x", "/{}", "/{...}", "/%2f", "/%41", "", "a", "/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := ParseTemplate(s)
		if err != nil {
			return
		}
		if back := unparse(tpl, nil); back != s {
			t.Fatalf("ParseTemplate(%q) writes back as %q", s, back)
		}
		if len(tpl.Params()) > MaxTemplateParams {
			t.Fatalf("%q has %d params", s, len(tpl.Params()))
		}
		renamed := unparse(tpl, func(i int, _ Segment) string { return fmt.Sprintf("p%d", i) })
		again, err := ParseTemplate(renamed)
		if err != nil {
			t.Fatalf("shape of %q (%q) does not re-parse: %v", s, renamed, err)
		}
		if again.Shape() != tpl.Shape() {
			t.Fatalf("%q has shape %q, re-parsed %q has %q", s, tpl.Shape(), renamed, again.Shape())
		}
		for _, seg := range tpl.Segments {
			if seg.Kind == Literal && checkLiteral(seg.Text) != nil && seg.Text != "" {
				t.Fatalf("%q: literal %q does not pass checkLiteral", s, seg.Text)
			}
		}
	})
}
