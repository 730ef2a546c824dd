package plane_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/control/model"
	"github.com/rampart-edge/rampart/control/plane"
)

// Old rules leave the document: older than the bound or past the count,
// but the newest stays.
func TestPrunePurgeRules(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	rule := func(id uint64, age time.Duration) model.PurgeRule {
		return model.PurgeRule{ID: id, At: now.Add(-age), Route: "r"}
	}
	ids := func(rs []model.PurgeRule) (out []uint64) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	// The bounds the control plane uses.
	if plane.PurgeKeepFor != 24*time.Hour || plane.PurgeMaxRules != 1000 {
		t.Fatalf("bounds %s %d: update the READMEs", plane.PurgeKeepFor, plane.PurgeMaxRules)
	}
	for _, c := range []struct {
		name  string
		rules []model.PurgeRule
		max   int
		want  string
	}{
		{"none", nil, 10, "[]"},
		{"all young", []model.PurgeRule{rule(1, time.Hour), rule(2, time.Minute)}, 10, "[1 2]"},
		{"old ones go", []model.PurgeRule{rule(1, 25*time.Hour), rule(2, 24*time.Hour+time.Second), rule(3, 23*time.Hour)}, 10, "[3]"},
		{"exactly the bound stays", []model.PurgeRule{rule(1, 24*time.Hour), rule(2, 0)}, 10, "[1 2]"},
		{"the newest stays however old", []model.PurgeRule{rule(7, 48*time.Hour), rule(9, 30*time.Hour)}, 10, "[9]"},
		{"count bound keeps the newest", []model.PurgeRule{rule(1, 0), rule(2, 0), rule(3, 0), rule(4, 0)}, 2, "[3 4]"},
		{"count bound of 0 keeps one", []model.PurgeRule{rule(1, 0), rule(2, 0)}, 0, "[2]"},
	} {
		got := plane.PrunePurgeRules(c.rules, now, 24*time.Hour, c.max)
		if s := fmt.Sprint(ids(got)); s != c.want {
			t.Errorf("%s: kept %s, want %s", c.name, s, c.want)
		}
	}
}
