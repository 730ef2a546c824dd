package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/control/model"
)

// rampart control purge: each selector alone and together, the list, the
// usage errors, the API's 400 and the read token's 403.
func TestPurgeCommand(t *testing.T) {
	p := startPlane(t)
	out := p.ok(t, "purge", "-route", "pages")
	if !strings.Contains(out, `purge rule 1 published in purge document 1.1 (1 rules listed): route "pages"`) {
		t.Fatalf("purge -route:\n%s", out)
	}
	p.ok(t, "purge", "-prefix", "example.com/blog/")
	out = p.ok(t, "purge", "-surrogate-key", "post-1", "-prefix", "example.com/", "-o", "json")
	var res PurgeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Sequence != 3 || res.Rule.ID != 3 || res.Rule.SurrogateKey != "post-1" || res.Rule.Prefix != "example.com/" {
		t.Fatalf("purge -o json: %v %s", err, out)
	}
	golden(t, "purge-list.txt", p.ok(t, "purge", "list"))
	var st model.PurgeState
	if err := json.Unmarshal([]byte(p.ok(t, "purge", "list", "-o", "json")), &st); err != nil || st.Sequence != 3 || len(st.Rules) != 3 || st.Rules[0].By != "ops" {
		t.Fatalf("purge list -o json: %v %+v", err, st)
	}
	for _, c := range []struct {
		token string
		args  []string
		want  string
	}{
		{adminToken, []string{"purge"}, "usage: rampart control purge -route R"},
		{adminToken, []string{"purge", "pages"}, "usage: rampart control purge"},
		{adminToken, []string{"purge", "list", "x"}, "usage: rampart control purge list"},
		{adminToken, []string{"purge", "-surrogate-key", "a b"}, "400 Bad Request: bad request: surrogate_key \"a b\" has white space"},
		{readToken, []string{"purge", "-route", "pages"}, "403"},
	} {
		out, err := p.run(t, c.token, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q; output:\n%s", c.args, err, c.want, out)
		}
	}
	if out, err := p.run(t, readToken, "purge", "list"); err != nil || !strings.Contains(out, "3 rules") {
		t.Fatalf("purge list with the read token: %v\n%s", err, out)
	}
}
