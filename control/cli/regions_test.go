package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/control/model"
)

const regionalCfg = `listeners: [{name: public, address: "127.0.0.1:0"}]
regions: [{name: eu-west}, {name: us-east}]
platforms:
  - {name: accounts-db, clusters: [users], replica_regions: [eu-west, us-east]}
clusters:
  - {name: users, endpoints: [{address: "10.0.0.1:8080", region: eu-west}, {address: "10.0.0.2:8080", region: us-east}]}
routes:
` + getUser

// The regional commands: regions (golden), drain-region and
// undrain-region, writer set with and without a matching expected epoch,
// platforms (golden), -o json.
func TestRegionCommands(t *testing.T) {
	p := startPlane(t)
	p.ok(t, "submit", "-f", p.file(t, "regional.yaml", regionalCfg))
	eventually(t, "r1 done", func() bool { return p.rollout(t, "r1").State == model.StateDone })
	v := p.rollout(t, "r1").Version
	for _, n := range []struct {
		id, region string
		ready      bool
	}{{"eu-1", "eu-west", true}, {"eu-2", "eu-west", true}, {"us-1", "us-east", true}, {"us-2", "us-east", false}} {
		p.report(t, model.Status{Identity: model.Identity{NodeID: n.id, Region: n.region}, Active: v, Ready: n.ready})
	}
	out := p.ok(t, "regions")
	first, table, _ := strings.Cut(out, "\n")
	if !regexp.MustCompile(`^region-state document \d+\.\d+, created \d{4}-`).MatchString(first) {
		t.Fatalf("regions, first line: %q", first)
	}
	golden(t, "regions.txt", table)

	if out := p.ok(t, "drain-region", "eu-west", "-reason", "db maintenance"); !strings.Contains(out, "region eu-west draining since") || !strings.Contains(out, "db maintenance") {
		t.Fatalf("drain-region:\n%s", out)
	}
	if out := p.ok(t, "regions"); !strings.Contains(out, "yes (db maintenance)") {
		t.Fatalf("regions after the drain:\n%s", out)
	}
	if _, err := p.run(t, readToken, "drain-region", "us-east"); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "may not") {
		t.Fatalf("drain-region with a read token: %v", err)
	}
	if out := p.ok(t, "undrain-region", "eu-west"); out != "region eu-west no longer draining\n" {
		t.Fatalf("undrain-region: %q", out)
	}
	if _, err := p.run(t, adminToken, "undrain-region", "eu-west"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("undrain-region twice: %v", err)
	}

	if out := p.ok(t, "writer", "set", "accounts-db", "eu-west"); !strings.HasPrefix(out, "platform accounts-db: writer eu-west, epoch 1 (switched ") {
		t.Fatalf("writer set: %q", out)
	}
	if _, err := p.run(t, adminToken, "writer", "set", "accounts-db", "us-east", "-expected-epoch", "0"); err == nil || !strings.Contains(err.Error(), "expected epoch 0, the current one is 1") {
		t.Fatalf("writer set with a stale epoch: %v", err)
	}
	out = p.ok(t, "writer", "set", "accounts-db", "us-east", "-expected-epoch", "1", "-o", "json")
	var pw model.PlatformWriter
	if err := json.Unmarshal([]byte(out), &pw); err != nil || pw.Epoch != 2 || pw.Region != "us-east" || pw.By != "ops" {
		t.Fatalf("writer set -o json: %v %s", err, out)
	}
	if _, err := p.run(t, adminToken, "writer", "set", "accounts-db"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("writer set without a region: %v", err)
	}
	if _, err := p.run(t, adminToken, "writer", "set", "accounts-db", "eu-west", "-expected-epoch", "x"); err == nil || !strings.Contains(err.Error(), "whole number") {
		t.Fatalf("writer set -expected-epoch x: %v", err)
	}
	golden(t, "platforms.txt", p.ok(t, "platforms"))
}
