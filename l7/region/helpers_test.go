package region

import (
	"os"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/format/envelope"
	"github.com/rampart-edge/rampart/format/regionstate"
	"github.com/rampart-edge/rampart/l7/snapshot"
)

// t0 is the tests' "now": region states are created at it.
var t0 = time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)

func loadPolicy(t testing.TB, mutate func(c *snapshot.Config)) (*Policy, *snapshot.Config) {
	t.Helper()
	data, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := snapshot.ParseYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(c)
	}
	if _, err := snapshot.Compile(c); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

// healthyState is every region healthy and serving the policy's snapshot,
// accounts-db and ledger-db written in eu-west, every replica 10 ms behind,
// observed a second before t0.
func healthyState() *regionstate.State {
	cfg := envelope.Version{Epoch: 4, Sequence: 20}
	obs := t0.Add(-time.Second)
	rep := func(regions ...string) []regionstate.Replica {
		var out []regionstate.Replica
		for _, r := range regions {
			out = append(out, regionstate.Replica{Region: r, LagMs: 10, ObservedAt: obs})
		}
		return out
	}
	return &regionstate.State{
		Version: envelope.Version{Epoch: 1, Sequence: 7},
		Created: t0,
		Regions: []regionstate.Region{
			{Name: "eu-central", Healthy: true, ConfigVersion: cfg},
			{Name: "eu-west", Healthy: true, ConfigVersion: cfg},
			{Name: "us-east", Healthy: true, ConfigVersion: cfg},
		},
		Platforms: []regionstate.Platform{
			{Name: "accounts-db", Writer: "eu-west", WriterEpoch: 3, Replicas: rep("eu-central", "eu-west", "us-east")},
			{Name: "ledger-db", Writer: "eu-west", WriterEpoch: 9, Replicas: rep("eu-central", "eu-west")},
		},
	}
}

func region(s *regionstate.State, name string) *regionstate.Region {
	for i := range s.Regions {
		if s.Regions[i].Name == name {
			return &s.Regions[i]
		}
	}
	panic("no region " + name)
}

func plat(s *regionstate.State, name string) *regionstate.Platform {
	for i := range s.Platforms {
		if s.Platforms[i].Name == name {
			return &s.Platforms[i]
		}
	}
	panic("no platform " + name)
}

func replica(s *regionstate.State, platform, region string) *regionstate.Replica {
	p := plat(s, platform)
	for i := range p.Replicas {
		if p.Replicas[i].Region == region {
			return &p.Replicas[i]
		}
	}
	panic("no replica " + platform + "/" + region)
}

func dropReplica(s *regionstate.State, platform, region string) {
	p := plat(s, platform)
	for i := range p.Replicas {
		if p.Replicas[i].Region == region {
			p.Replicas = append(p.Replicas[:i], p.Replicas[i+1:]...)
			return
		}
	}
}

// fakeClock is a settable clock for the tracker.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
