package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/rampart-edge/rampart/lab/demo"
)

const verdictsText = `# HELP rampart_agent_verdicts_total XDP and sk_lookup verdicts by reason.
# TYPE rampart_agent_verdicts_total counter
rampart_agent_verdicts_total{reason="drop_deny"} 12
rampart_agent_verdicts_total{reason="drop_syn"} 98765
rampart_agent_verdicts_total{reason="pass"} 4.2e+06
# TYPE rampart_agent_ready gauge
rampart_agent_ready 1
`

func TestParseVerdicts(t *testing.T) {
	m, err := parseVerdicts(strings.NewReader(verdictsText))
	if err != nil {
		t.Fatal(err)
	}
	if m["drop_deny"] != 12 || m["drop_syn"] != 98765 || m["pass"] != 4_200_000 || len(m) != 3 {
		t.Fatalf("verdicts %v", m)
	}
	if _, err := parseVerdicts(strings.NewReader("rampart_agent_ready 1\n")); err == nil {
		t.Fatal("no verdicts in the metrics: no error")
	}
	if _, err := parseVerdicts(strings.NewReader("rampart_agent_verdicts_total{reason=\"x\" 1\n")); err == nil {
		t.Fatal("broken exposition: no error")
	}
	before := verdictCounts{"eu1": m}
	after := verdictCounts{"eu1": {"drop_deny": 20, "drop_syn": 98765, "pass": 1}}
	if d := after.delta(before, "eu1", "drop_deny"); d != 8 {
		t.Fatalf("delta %d, want 8", d)
	}
	if d := after.delta(before, "eu1", "pass"); d != 0 { // a counter that went down (agent maps replaced): no negative delta
		t.Fatalf("delta of a counter that went down: %d", d)
	}
}

func FuzzParseVerdicts(f *testing.F) {
	f.Add(verdictsText)
	f.Add("rampart_agent_verdicts_total 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseVerdicts(strings.NewReader(s))
		if err == nil && m == nil {
			t.Fatal("nil map without an error")
		}
	})
}

// The deny's effect at a site is the last first-answer after t0:
// retransmitted SYN-ACKs of probes answered before t0 do not count.
func TestDenyEffect(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	sp := &siteProbe{seen: map[uint16]bool{}}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sp.record(49152, at(-200))
	sp.record(49153, at(-100))
	sp.record(49154, at(40))
	sp.record(49155, at(85))
	sp.record(49152, at(800)) // retransmission of an answer from before t0
	sp.record(49153, at(2900))
	if d := lastAnswerAfter(sp.answers, t0); d != 85*time.Millisecond {
		t.Fatalf("effect after %v, want 85ms", d)
	}
	if len(sp.answers) != 4 {
		t.Fatalf("%d answers recorded, want 4 (retransmissions ignored)", len(sp.answers))
	}
	if d := lastAnswerAfter(sp.answers[:2], t0); d != 0 {
		t.Fatalf("no answer after t0: %v, want 0", d)
	}
}

func TestLimitAllowance(t *testing.T) {
	// 4 sources at 4 sites for 3 s: (400 + 200×3) × 16.
	if a := limitAllowance(demo.DefaultLimits, 4, 4, 3*time.Second); a != 16000 {
		t.Fatalf("allowance %d, want 16000", a)
	}
}
