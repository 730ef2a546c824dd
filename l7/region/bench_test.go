package region

import (
	"fmt"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/l7/snapshot"
)

// withTenants adds n tenants of the three modes to the test policy.
func withTenants(n int) func(c *snapshot.Config) {
	return func(c *snapshot.Config) {
		for i := range n {
			t := snapshot.Tenant{ID: fmt.Sprintf("tenant-%05d", i), PrimaryRegion: "eu-west"}
			switch i % 3 {
			case 1:
				t.AllowedRegions, t.FailoverMode, t.BackupRegion = []string{"eu-west", "eu-central"}, snapshot.FailoverPrimaryBackup, "eu-central"
			case 2:
				t.AllowedRegions, t.FailoverMode, t.WeightedOptIn = []string{"eu-west", "eu-central", "us-east"}, snapshot.FailoverWeighted, true
			}
			c.Tenants = append(c.Tenants, t)
		}
	}
}

// BenchmarkDecide: one decision for a random one of 10,000 tenants, reads
// and writes mixed, with a hint on every fourth request.
func BenchmarkDecide(b *testing.B) {
	p, _ := loadPolicy(b, withTenants(10_000))
	v := NewTracker(func() time.Time { return t0 }).View(p, healthyState())
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("tenant-%05d", (i*7919)%10_000)
	}
	rules := []*Rule{p.Rule("get-account"), p.Rule("get-account"), p.Rule("get-account"), p.Rule("update-account")}
	hints := []string{"", "", "", "eu-central"}
	var d Decision
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		in := Input{Tenant: ids[i%len(ids)], Hint: hints[i%4], Local: 1, Now: t0.UnixNano(), Roll: uint32(i)}
		v.Decide(rules[i%4], &in, &d)
		i++
	}
}

func BenchmarkCompileAndView(b *testing.B) {
	_, c := loadPolicy(b, withTenants(10_000))
	tr := NewTracker(func() time.Time { return t0 })
	s := healthyState()
	b.ReportAllocs()
	for b.Loop() {
		p, err := Compile(c)
		if err != nil {
			b.Fatal(err)
		}
		tr.View(p, s)
	}
}
