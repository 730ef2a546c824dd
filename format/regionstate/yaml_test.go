package regionstate

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/format/envelope"
)

const sampleYAML = `
regions:
  - {name: us-east, healthy: false, config_version: "1.39", draining: true}
  - {name: eu-west, healthy: true, config_version: "1.40"}
platforms:
  - name: users
    replicas:
      - {region: us-east, lag_ms: 12, observed_ago: 2s}
  - name: billing
    writer: eu-west
    writer_epoch: 7
    replicas:
      - {region: us-east, lag_ms: 250, observed_at: "2026-12-02T03:59:57Z"}
      - {region: eu-west, lag_ms: 0, observed_ago: 2s}
`

func TestParseYAML(t *testing.T) {
	want := sample()
	got, err := ParseYAML([]byte(sampleYAML), want.Version, testCreated)
	if err != nil {
		t.Fatalf("ParseYAML: %v", err)
	}
	if !equalState(got, want) {
		t.Fatalf("ParseYAML:\n got %+v\nwant %+v", got, want)
	}
	empty, err := ParseYAML([]byte("{}"), want.Version, testCreated)
	if err != nil || len(empty.Regions) != 0 {
		t.Fatalf("ParseYAML({}) = %+v, %v", empty, err)
	}
	obsNow, err := ParseYAML([]byte("regions: [{name: a}]\nplatforms: [{name: p, replicas: [{region: a}]}]\n"), want.Version, testCreated)
	if err != nil || !obsNow.Platforms[0].Replicas[0].ObservedAt.Equal(testCreated) {
		t.Fatalf("a replica without a time is observed now: %+v, %v", obsNow, err)
	}
}

func TestParseYAMLRefused(t *testing.T) {
	v := envelope.Version{Epoch: 1, Sequence: 1}
	cases := []struct{ name, src, want string }{
		{"empty", "", "empty"},
		{"unknown key", "regions: [{name: a, zone: b}]", "zone"},
		{"two documents", "regions: []\n---\nregions: []\n", "more than one"},
		{"bad config version", `regions: [{name: a, config_version: "1"}]`, "config_version"},
		{"both times", `regions: [{name: a}]` + "\nplatforms: [{name: p, replicas: [{region: a, observed_ago: 1s, observed_at: \"2026-12-02T03:00:00Z\"}]}]", "both"},
		{"negative ago", `regions: [{name: a}]` + "\nplatforms: [{name: p, replicas: [{region: a, observed_ago: -1s}]}]", "observed_ago"},
		{"bad time", `regions: [{name: a}]` + "\nplatforms: [{name: p, replicas: [{region: a, observed_at: yesterday}]}]", "observed_at"},
		{"future observation", `regions: [{name: a}]` + "\nplatforms: [{name: p, replicas: [{region: a, observed_at: \"2027-01-01T00:00:00Z\"}]}]", "after the document's created time"},
		{"duplicate region", "regions: [{name: a}, {name: a}]", "without duplicates"},
		{"unknown writer", "regions: [{name: a}]\nplatforms: [{name: p, writer: b}]", "not a listed region"},
		{"negative lag", "regions: [{name: a}]\nplatforms: [{name: p, replicas: [{region: a, lag_ms: -3}]}]", "cannot unmarshal"},
	}
	for _, c := range cases {
		_, err := ParseYAML([]byte(c.src), v, testCreated)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ParseYAML = %v, want an error saying %q", c.name, err, c.want)
		}
	}
	_, err := ParseYAML([]byte("regions: [{name: a}, {name: a}]"), v, testCreated)
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("a duplicate region is not ErrInvalid: %v", err)
	}
}

func FuzzParseYAML(f *testing.F) {
	f.Add([]byte(sampleYAML))
	f.Add([]byte("{}"))
	f.Add([]byte("regions: [{name: a}]\nplatforms: [{name: p, writer: a, replicas: [{region: a, observed_ago: 1ms}]}]"))
	priv := testKey(f, 1)
	v := envelope.Version{Epoch: 1, Sequence: 2}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := ParseYAML(src, v, testCreated)
		if err != nil {
			return
		}
		// What the source accepts, Build signs and Parse reads back.
		file, err := Build(priv, s)
		if err != nil {
			t.Fatalf("Build of an accepted source: %v", err)
		}
		back, err := Parse(file, priv.Public().(ed25519.PublicKey))
		if err != nil || !equalState(back, s) {
			t.Fatalf("Parse(Build(ParseYAML(src))) = %v, %v", back, err)
		}
	})
}
