package agent

import (
	"strings"
	"testing"

	"github.com/rampart-edge/rampart/anycast"
)

func TestParseOperatorDrains(t *testing.T) {
	ds, err := parseOperatorDrains([]byte(`[{"source":"x","vip":"203.0.113.10/24","reason":"work","since":"2026-12-02T05:00:00Z"},{"since":"2026-12-02T05:00:00Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].VIP != "203.0.113.0/24" || ds[0].Source != anycast.DrainOperator || ds[1].VIP != "" {
		t.Fatalf("parsed %+v", ds)
	}
	for in, want := range map[string]string{
		`[{"vip":"nope"}]`: `drain 0: drain vip "nope"`,
		`[{"vip":"192.0.2.1/32"},{"vip":"192.0.2.1/32"}]`: "listed twice",
		`[{"reason":"a\nb"}]`:                             "control character",
		`[{"what":1}]`:                                    "unknown field",
		`[] []`:                                           "trailing data",
		`{}`:                                              "cannot unmarshal",
	} {
		if _, err := parseOperatorDrains([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", in, err, want)
		}
	}
}

func FuzzParseOperatorDrains(f *testing.F) {
	f.Add([]byte(`[{"vip":"203.0.113.10/32","reason":"maintenance","since":"2026-12-02T05:00:00Z"}]`))
	f.Add([]byte(`[{"since":"2026-12-02T05:00:00Z"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, err := parseOperatorDrains(data)
		if err != nil {
			return
		}
		for _, d := range ds {
			c := d
			if err := anycast.CheckDrain(&c); err != nil || c != d {
				t.Fatalf("a parsed drain does not check or is not canonical: %+v %v", d, err)
			}
		}
	})
}
